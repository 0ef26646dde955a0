import { Route, Routes } from "react-router-dom";
import type { Page } from "../../api";
import { ErrorBanner, Loading, Table, useApi } from "../../ui";

interface AccessTokenRow {
  id: number;
  name: string;
  prefix: string;
  scopes: string[];
  expires_at: string;
  is_active: boolean;
}

function TokenList() {
  const { data, error, loading } = useApi<Page<AccessTokenRow>>("/api/tokens/");
  return (
    <>
      <h1>Access tokens</h1>
      <p>Datasets are pulled over the API with a personal access token.</p>
      <ErrorBanner error={error} />
      {loading ? <Loading /> : null}
      {data ? (
        <Table
          rows={data.results}
          rowKey={(t) => t.id}
          empty="No tokens yet."
          columns={[
            { header: "Name", cell: (t) => t.name },
            { header: "Token", cell: (t) => <code>{t.prefix}…</code> },
            { header: "Scopes", cell: (t) => t.scopes.join(", ") },
            { header: "Expires", cell: (t) => new Date(t.expires_at).toLocaleDateString() },
            { header: "Active", cell: (t) => (t.is_active ? "yes" : "no") },
          ]}
        />
      ) : null}
    </>
  );
}

/** The ML engineer's pages. */
export function EngineerRoutes() {
  return (
    <Routes>
      <Route index element={<TokenList />} />
    </Routes>
  );
}
