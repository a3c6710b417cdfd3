// What a watched discovery source does with each new picture of a pool: log problems when they
// change, and pass the endpoints on only when they differ from the last ones passed (watch
// events that change nothing routable must not republish the slot table).
import type { Logger } from "pino";
import type { PoolConfig } from "../config/schema.ts";
import type { EndpointsListener } from "./source.ts";

export interface ReportedState {
  pool: PoolConfig;
  lastReported: string | undefined;
  lastProblems: string;
}

export function reportChanges(
  w: ReportedState,
  picture: { endpoints: Parameters<EndpointsListener>[1]; problems: string[] },
  log: Logger,
  what: { problems: string; endpoints: string },
  onEndpoints: EndpointsListener,
): void {
  const { endpoints, problems } = picture;
  const problemText = problems.join("\n");
  if (problemText !== w.lastProblems && problems.length > 0)
    log.warn({ pool: w.pool.name, problems }, what.problems);
  w.lastProblems = problemText;
  const text = JSON.stringify(endpoints);
  if (text === w.lastReported) return;
  w.lastReported = text;
  log.info({ pool: w.pool.name, endpoints: endpoints.map((e) => e.address) }, what.endpoints);
  onEndpoints(w.pool, endpoints);
}
