export { Button } from "./Button";
export { ErrorBanner } from "./ErrorBanner";
export { Loading } from "./Loading";
export { Table } from "./Table";
export type { Column } from "./Table";
export { useApi } from "./useApi";
export { MeContext, useMe } from "./me";
export { usePoll } from "./usePoll";
