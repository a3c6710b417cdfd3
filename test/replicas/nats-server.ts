// Debian's nats-server on a loopback port, for the replica tests. CI installs it (.ci/run), so
// there a missing binary is a failure; only on a developer machine without it (CI unset) do the
// replica tests skip, saying why.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePortRange } from "../sim/helpers.ts";
import { until } from "../until.ts";

export const NATS_SERVER = "/usr/sbin/nats-server";

/** Why the replica tests cannot run here, or null when they can (or must, in CI). */
export function natsSkipReason(): string | null {
  if (existsSync(NATS_SERVER) || process.env.CI) return null;
  return `${NATS_SERVER} is missing and CI is unset: skipping the replica tests (apt-get install -y nats-server)`;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** A nats-server that can be stopped and started again on the same port (a NATS outage). */
export class NatsServer {
  #child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly config: string | null,
    /** The HTTP monitoring port, when the config file asks for one (overridden to a free port). */
    readonly monitorPort: number | null = null,
  ) {}

  /**
   * `maxPayload`: the server's max_payload (bytes; its default is 1 MiB), through a config file.
   * `configText`: a whole config file instead (deploy/nats.yaml's); its ports are overridden on
   * the command line with free loopback ones (`monitorPort` is the HTTP monitoring one).
   */
  static async start(opts: { maxPayload?: number; configText?: string } = {}): Promise<NatsServer> {
    if (!existsSync(NATS_SERVER))
      throw new Error(`${NATS_SERVER} is missing: .ci/run installs it (apt-get install -y nats-server)`);
    let config: string | null = null;
    if (opts.configText !== undefined) {
      config = join(mkdtempSync(join(tmpdir(), "kvroute-nats-")), "nats.conf");
      writeFileSync(config, opts.configText);
    } else if (opts.maxPayload !== undefined) {
      config = join(mkdtempSync(join(tmpdir(), "kvroute-nats-")), "nats.conf");
      writeFileSync(config, `max_payload: ${opts.maxPayload}\n`);
    }
    const ports = await freePortRange(2);
    const s = new NatsServer(
      ports,
      config,
      config !== null && opts.configText !== undefined ? ports + 1 : null,
    );
    await s.up();
    return s;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async up(): Promise<void> {
    const args = ["-a", "127.0.0.1", "-p", String(this.port)];
    if (this.config !== null) args.push("-c", this.config);
    if (this.monitorPort !== null) args.push("-m", String(this.monitorPort));
    const child = spawn(NATS_SERVER, args, { stdio: "ignore" });
    this.#child = child;
    await until(`nats-server on port ${this.port}`, async () => {
      if (child.exitCode !== null) throw new Error(`nats-server exited with ${child.exitCode}`);
      return accepts(this.port);
    });
  }

  async down(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
}
