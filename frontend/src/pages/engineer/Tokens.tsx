/** Personal access tokens: create with scopes and an expiry (the secret is shown once), see
 * when each was last used, revoke. */
import { useState } from "react";
import { api, type Page } from "../../api";
import { Button, ErrorBanner, Loading, Table, toggled, useApi, useSubmit } from "../../ui";
import { when } from "../../ui/format";

const RESOURCES = ["projects", "tasks", "episodes", "datasets", "models"];

interface Token {
  id: number;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
  is_active: boolean;
  token?: string;
}

export function Tokens() {
  const { data, error, loading, reload } = useApi<Page<Token>>("/api/tokens/?page_size=200");
  const [name, setName] = useState("");
  const [days, setDays] = useState(90);
  const [scopes, setScopes] = useState<Set<string>>(new Set(["datasets:read"]));
  const [fresh, setFresh] = useState<Token | null>(null);
  const action = useSubmit();
  const toggle = (scope: string) => setScopes((old) => toggled(old, scope));
  const create = action.onSubmit(async () => {
    setFresh(await api.post<Token>("/api/tokens/", { name, days, scopes: [...scopes] }));
    setName("");
    reload();
  });
  const revoke = (token: Token) => {
    if (!window.confirm(`Revoke the token “${token.name}”? Programs using it will be refused.`)) return;
    void action.run(async () => {
      await api.del(`/api/tokens/${token.id}/`);
      reload();
    });
  };
  return (
    <>
      <form className="card" onSubmit={create} aria-labelledby="new-token">
        <h2 id="new-token">New access token</h2>
        <p className="meta">
          Use it as <code>Authorization: Bearer tdm_…</code>. Only a hash is stored: the token is shown once.
        </p>
        <div className="form-row">
          <label className="field">
            Name
            <input required value={name} onChange={(e) => setName(e.target.value)} maxLength={100} />
          </label>
          <label className="field">
            Expires after (days)
            <input type="number" min={1} max={365} value={days} onChange={(e) => setDays(Number(e.target.value))} />
          </label>
        </div>
        <fieldset>
          <legend>Scopes</legend>
          <div className="form-row">
            {RESOURCES.map((resource) =>
              ["read", "write"].map((level) => {
                const scope = `${resource}:${level}`;
                return (
                  <label key={scope}>
                    <input type="checkbox" checked={scopes.has(scope)} onChange={() => toggle(scope)} /> {scope}
                  </label>
                );
              }),
            )}
          </div>
        </fieldset>
        <Button
          type="submit"
          variant="primary"
          disabled={!name.trim() || scopes.size === 0}
          disabledReason={!name.trim() ? "Name the token first." : "Choose at least one scope."}
        >
          Create token
        </Button>
      </form>
      {fresh?.token ? (
        <div className="ok-banner" role="status" data-testid="new-token">
          <p>
            Token <strong>{fresh.name}</strong> created. Copy it now — it will not be shown again:
          </p>
          <p className="secret" data-testid="token-secret">
            {fresh.token}
          </p>
          <Button onClick={() => navigator.clipboard?.writeText(fresh.token ?? "")}>Copy</Button>{" "}
          <Button onClick={() => setFresh(null)}>I have stored it</Button>
        </div>
      ) : null}
      <ErrorBanner error={action.error ?? error} onDismiss={action.dismiss} />
      {loading && !data ? <Loading /> : null}
      {data ? (
        <Table
          caption="Your tokens"
          rows={data.results}
          rowKey={(t) => t.id}
          empty="You have no access tokens."
          columns={[
            { header: "Name", cell: (t) => t.name },
            { header: "Token", cell: (t) => <code>{t.prefix}…</code> },
            { header: "Scopes", cell: (t) => t.scopes.join(", ") },
            { header: "Created", cell: (t) => when(t.created_at) },
            { header: "Expires", cell: (t) => when(t.expires_at) },
            { header: "Last used", cell: (t) => (t.last_used_at ? when(t.last_used_at) : "never") },
            {
              header: "Status",
              cell: (t) => (t.revoked_at ? `revoked ${when(t.revoked_at)}` : t.is_active ? "active" : "expired"),
            },
            {
              header: "Actions",
              cell: (t) =>
                t.revoked_at ? null : (
                  <Button variant="danger" onClick={() => revoke(t)} aria-label={`Revoke ${t.name}`}>
                    Revoke
                  </Button>
                ),
            },
          ]}
        />
      ) : null}
    </>
  );
}
