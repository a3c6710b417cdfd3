// The dashboard's routes for the control plane's route table: the page at / and /dashboard,
// its modules and stylesheet under /dashboard/, and the live status stream. All read-only and,
// like /v1/status and /metrics, not behind the gateways' bearer token (docs/operations.md).
import type { Routes } from "../http-server.ts";
import { loadAssets, serveAsset } from "./assets.ts";
import { StatusStream } from "./status-stream.ts";

export function dashboardRoutes(
  buildStatus: () => unknown,
  opts: { dir?: string; intervalMs?: number } = {},
): Routes {
  const assets = loadAssets(opts.dir);
  const page = assets.get("index.html");
  if (page === undefined) throw new Error("dashboard: index.html is missing");
  const routes: Routes = {
    "GET /": serveAsset(page),
    "GET /dashboard": serveAsset(page),
    // The page's relative URLs resolve from /dashboard, not /dashboard/: send a typed trailing
    // slash back (relative Location, so a path-prefix proxy keeps working).
    "GET /dashboard/": (_req, res) => {
      res.writeHead(301, { location: "../dashboard" }).end();
    },
    "GET /v1/events/status": new StatusStream(buildStatus, opts.intervalMs).handle,
  };
  for (const asset of assets.values())
    if (asset !== page) routes[`GET /dashboard/${asset.name}`] = serveAsset(asset);
  return routes;
}
