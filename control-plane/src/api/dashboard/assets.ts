// The dashboard's static files (public/), read once at start: no build step, nothing fetched
// at run time. Each file gets its content type and an ETag, so browsers revalidate instead of
// downloading again, and an upgraded control plane never serves a stale mix of modules.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

// The page renders data from gateways (request ids come from clients): only our own scripts
// may run, and nothing is loaded from anywhere else.
const SECURITY_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
};

export interface Asset {
  name: string;
  body: Buffer;
  contentType: string;
  etag: string;
}

export const PUBLIC_DIR = fileURLToPath(new URL("public", import.meta.url));

/** Every file of `dir` (flat); a file type we cannot label is an error at start, not a wrong header later. */
export function loadAssets(dir = PUBLIC_DIR): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir).sort()) {
    const contentType = CONTENT_TYPES[extname(name)];
    if (contentType === undefined) throw new Error(`dashboard asset ${name}: unknown file type`);
    const body = readFileSync(join(dir, name));
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
    assets.set(name, { name, body, contentType, etag });
  }
  return assets;
}

export function serveAsset(asset: Asset) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const headers = { etag: asset.etag, "cache-control": "no-cache", ...SECURITY_HEADERS };
    if (req.headers["if-none-match"] === asset.etag) {
      res.writeHead(304, headers).end();
      return;
    }
    res
      .writeHead(200, { ...headers, "content-type": asset.contentType, "content-length": asset.body.length })
      .end(asset.body);
  };
}
