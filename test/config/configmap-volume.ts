// A directory laid out as the kubelet mounts a ConfigMap: each key is a symlink through `..data`,
// itself a symlink to a timestamped directory. An update writes a new directory and renames a new
// `..data` over the old one (Kubernetes' AtomicWriter), then removes the old directory: the file
// path the control plane reads never changes, its content does.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export class ConfigMapVolume {
  readonly dir = mkdtempSync(join(tmpdir(), "kvroute-configmap-"));
  #generation = 0;
  #current: string | null = null;

  /** The path a pod reads, e.g. /etc/kvroute/config.yaml. */
  path(key: string): string {
    return join(this.dir, key);
  }

  /** Publishes a new version of every key, the way the kubelet does. */
  update(files: Record<string, string>): void {
    const generation = `..gen_${++this.#generation}`;
    mkdirSync(join(this.dir, generation));
    for (const [key, text] of Object.entries(files)) writeFileSync(join(this.dir, generation, key), text);
    symlinkSync(generation, join(this.dir, "..data_tmp"));
    renameSync(join(this.dir, "..data_tmp"), join(this.dir, "..data"));
    for (const key of Object.keys(files)) {
      try {
        symlinkSync(join("..data", key), join(this.dir, key));
      } catch {
        // already linked by an earlier version
      }
    }
    if (this.#current !== null) rmSync(join(this.dir, this.#current), { recursive: true });
    this.#current = generation;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
