// Calls back when a configuration file's content changes. The directory is watched, not the
// file: Kubernetes updates a mounted ConfigMap by writing a new timestamped directory and
// renaming the `..data` symlink over the old one, so the file's own inode never changes and a
// watch on it would see nothing. Events are coalesced for a short moment (the atomic writer
// makes several) and the content is compared, so a rename that changes nothing calls nobody.
// Node's fs.watch is enough here (one directory, Linux inotify); a watcher library would add
// polling fallbacks this does not need.
import { createHash } from "node:crypto";
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { basename, dirname } from "node:path";

const COALESCE_MS = 100;

export interface ConfigFileWatch {
  close(): void;
}

function digest(path: string): string | null {
  try {
    return createHash("sha256").update(readFileSync(path)).digest("hex");
  } catch {
    return null; // mid-swap or removed: the next event says more
  }
}

export function watchConfigFile(path: string, onChange: () => void): ConfigFileWatch {
  let seen = digest(path);
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    timer = undefined;
    const now = digest(path);
    if (now === null || now === seen) return;
    seen = now;
    onChange();
  };
  const name = basename(path);
  const watcher: FSWatcher = watch(dirname(path), (_event, file) => {
    // The file itself, or a symlink swap (`..data`, whose name is not the file's).
    if (file !== null && file !== name && !file.startsWith("..")) return;
    clearTimeout(timer);
    timer = setTimeout(check, COALESCE_MS);
  });
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
