import type { Page } from "../api";
import { Button } from "./Button";

/** Previous and next page of a paginated list, shown only when there is more than one page. */
export function Pager({ page, data, onChange }: { page: number; data: Page<unknown> | null; onChange: (page: number) => void }) {
  if (!data || !(data.next || data.previous)) return null;
  return (
    <div className="form-row">
      <Button disabled={!data.previous} disabledReason="This is the first page." onClick={() => onChange(page - 1)}>
        Previous page
      </Button>
      <span>Page {page}</span>
      <Button disabled={!data.next} disabledReason="This is the last page." onClick={() => onChange(page + 1)}>
        Next page
      </Button>
    </div>
  );
}
