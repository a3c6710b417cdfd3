// Reads a Dockerfile into its stages and the instructions tests need (FROM, WORKDIR, COPY, RUN,
// ARG, ENV, USER, EXPOSE, ENTRYPOINT, CMD), so a test can lay out and start what an image would run
// without Docker. Continuation lines (trailing backslash) are joined; comments are dropped.

export interface Copy {
  /** `--from=<stage>`, or null for the build context. */
  from: string | null;
  sources: string[];
  dest: string;
}

export interface Stage {
  image: string;
  name: string | null;
  workdir: string;
  copies: Copy[];
  runs: string[];
  env: Record<string, string>;
  user: string | null;
  expose: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
}

function joinContinuations(text: string): string[] {
  const out: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#") || (line === "" && pending === "")) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    out.push((pending + line).trim());
    pending = "";
  }
  if (pending !== "") out.push(pending.trim());
  return out.filter((l) => l !== "");
}

/** Exec form only (JSON array): the shell form would run under /bin/sh -c, which kvroute avoids. */
function execForm(arg: string, what: string): string[] {
  const parsed: unknown = JSON.parse(arg);
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === "string"))
    throw new Error(`${what} must be in exec form (a JSON array of strings): ${arg}`);
  return parsed;
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  /** The current stage's build arguments (an ARG is scoped to the stage that declares it). */
  const buildArgs = new Map<string, string>();
  for (const line of joinContinuations(text)) {
    const space = line.indexOf(" ");
    const op = line.slice(0, space).toUpperCase();
    const arg = line.slice(space + 1).trim();
    if (op === "FROM") {
      buildArgs.clear();
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(arg);
      if (m === null) throw new Error(`bad FROM: ${line}`);
      stages.push({
        image: m[1] as string,
        name: m[2] ?? null,
        workdir: "/",
        copies: [],
        runs: [],
        env: {},
        user: null,
        expose: [],
        entrypoint: null,
        cmd: null,
      });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`${op} before FROM`);
    switch (op) {
      case "WORKDIR":
        stage.workdir = arg.startsWith("/") ? arg : `${stage.workdir.replace(/\/$/, "")}/${arg}`;
        break;
      case "COPY": {
        const words = arg.split(/\s+/);
        let from: string | null = null;
        while (words[0]?.startsWith("--")) {
          const flag = words.shift() as string;
          if (flag.startsWith("--from=")) from = flag.slice("--from=".length);
        }
        const dest = words.pop();
        if (dest === undefined || words.length === 0) throw new Error(`bad COPY: ${line}`);
        stage.copies.push({ from, sources: words, dest });
        break;
      }
      case "RUN":
        stage.runs.push(arg);
        break;
      case "ARG": {
        // A build argument as `docker build` without --build-arg sees it: its default, else "".
        const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(arg);
        if (m === null) throw new Error(`ARG must be NAME or NAME=default: ${line}`);
        buildArgs.set(m[1] as string, m[2] ?? "");
        break;
      }
      case "ENV": {
        const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(arg);
        if (m === null) throw new Error(`ENV must be KEY=value: ${line}`);
        stage.env[m[1] as string] = (m[2] as string).replace(
          /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g,
          (_, name: string) => buildArgs.get(name) ?? "",
        );
        break;
      }
      case "USER":
        stage.user = arg;
        break;
      case "EXPOSE":
        stage.expose.push(...arg.split(/\s+/));
        break;
      case "ENTRYPOINT":
        stage.entrypoint = execForm(arg, "ENTRYPOINT");
        break;
      case "CMD":
        stage.cmd = execForm(arg, "CMD");
        break;
      default:
        throw new Error(`unhandled Dockerfile instruction ${op}`);
    }
  }
  return stages;
}
