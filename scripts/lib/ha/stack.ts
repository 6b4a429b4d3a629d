/**
 * A highly available PostgreSQL on this machine, from Debian's packages and nothing home-made: one etcd
 * (Patroni's store), two Patroni nodes running PostgreSQL 15 (a primary and a synchronous standby), and
 * one HAProxy with two frontends: PostgreSQL, routed to whichever node Patroni's REST API calls the
 * primary (`GET /primary`), and the app instances, round robin. Used by `npm run cluster` and
 * `npm run chaos -- --ha`; its faults (SIGKILL of the primary, a switchover, an etcd restart) are
 * Patroni's own failover at work.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { pgClient } from "~/server/db/client";
import { freePort } from "../free-port";

export interface HaStackOptions {
  /** `synchronous_mode` of Patroni: a commit waits for the standby (default), or not (`--async-replication`). */
  synchronous: boolean;
  /** Ports of the app instances behind HAProxy's app frontend (none: no app frontend). */
  appPorts: number[];
  log: (message: string) => void;
  /** Where each process's output goes (a folder made for the run otherwise). */
  logDir?: string;
  /** Fixed ports for the two frontends (`npm run cluster`); free ones otherwise. */
  postgresPort?: number;
  appPort?: number;
}

interface Node {
  name: string;
  pgPort: number;
  restPort: number;
  dataDir: string;
  config: string;
  process?: ChildProcess;
}

export interface Member {
  name: string;
  role: string;
  state: string;
  lag?: number | string;
  timeline?: number;
}

/** Patroni's timing: a dead primary's leader key expires after `ttl` s, then the standby takes it. */
const TTL_S = 10;
const LOOP_WAIT_S = 1;
/** loop_wait + 2 × retry_timeout must not exceed ttl. */
const RETRY_TIMEOUT_S = 4;

export class HaStack {
  private readonly dir: string;
  private readonly logDir: string;
  private readonly nodes: Node[] = [];
  private etcd?: ChildProcess;
  private etcdPorts = { client: 0, peer: 0 };
  private haproxy?: ChildProcess;
  private postgresFrontend = 0;
  private appFrontend = 0;
  private readonly owner = postgresOwner();

  constructor(private readonly options: HaStackOptions) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), "checkout-ha-"));
    this.logDir = options.logDir ?? path.join(this.dir, "logs");
    mkdirSync(this.logDir, { recursive: true });
  }

  /** `postgres://…` through HAProxy to the current primary, database `database`. */
  databaseUrl(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.postgresFrontend}/${database}`;
  }

  /** The app instances behind HAProxy. */
  get appUrl(): string {
    return `http://127.0.0.1:${this.appFrontend}`;
  }

  get etcdUrl(): string {
    return `http://127.0.0.1:${this.etcdPorts.client}`;
  }

  restUrls(): { name: string; url: string; pgPort: number }[] {
    return this.nodes.map((n) => ({ name: n.name, url: `http://127.0.0.1:${n.restPort}`, pgPort: n.pgPort }));
  }

  async start(): Promise<void> {
    const { log } = this.options;
    const binDir = postgresBinDir();
    this.etcdPorts = { client: await freePort(), peer: await freePort() };
    this.postgresFrontend = this.options.postgresPort ?? (await freePort());
    this.appFrontend = this.options.appPort ?? (await freePort());
    // The nodes' folders belong to the user PostgreSQL runs as (it refuses root).
    chownSync(this.dir, this.owner.uid, this.owner.gid);
    for (const name of ["pg1", "pg2"]) {
      const node: Node = {
        name,
        pgPort: await freePort(),
        restPort: await freePort(),
        dataDir: path.join(this.dir, name, "data"),
        config: path.join(this.dir, name, "patroni.yml"),
      };
      mkdirSync(path.dirname(node.dataDir), { recursive: true });
      writeFileSync(node.config, JSON.stringify(this.patroniConfig(node, binDir), null, 2));
      chownSync(path.dirname(node.dataDir), this.owner.uid, this.owner.gid);
      chownSync(node.config, this.owner.uid, this.owner.gid);
      this.nodes.push(node);
    }
    this.startEtcd();
    await waitFor("etcd to answer", 20_000, async () => (await fetch(`${this.etcdUrl}/health`)).ok);
    // The first node bootstraps the cluster (initdb); the second then clones it as a standby.
    const [first, second] = this.nodes as [Node, Node];
    this.startNode(first);
    await waitFor(`${first.name} to become the primary`, 60_000, async () => {
      return (await fetch(`http://127.0.0.1:${first.restPort}/primary`)).status === 200;
    });
    this.startNode(second);
    this.startHaproxy();
    await this.waitHealthy(90_000);
    log(
      `PostgreSQL cluster up: ${this.nodes.map((n) => `${n.name} 127.0.0.1:${n.pgPort}`).join(", ")}, ` +
        `${this.options.synchronous ? "synchronous" : "asynchronous"} replication; HAProxy → primary on 127.0.0.1:${this.postgresFrontend}`,
    );
  }

  /** What Patroni says of each member (`GET /cluster` on any node that answers). */
  async members(): Promise<Member[]> {
    for (const node of this.nodes) {
      try {
        const response = await fetch(`http://127.0.0.1:${node.restPort}/cluster`, {
          signal: AbortSignal.timeout(2_000),
        });
        if (response.ok) return ((await response.json()) as { members: Member[] }).members;
      } catch {
        // that node is down: ask the other
      }
    }
    return [];
  }

  async leader(): Promise<string | undefined> {
    return (await this.members()).find((m) => m.role === "leader" && m.state === "running")?.name;
  }

  /**
   * Both nodes running, one leader, the other streaming and caught up (a synchronous standby in
   * synchronous mode), and HAProxy routing to the leader.
   */
  async waitHealthy(timeoutMs = 90_000): Promise<void> {
    await waitFor("the PostgreSQL cluster to be whole again", timeoutMs, async () => {
      const members = await this.members();
      const leader = members.find((m) => m.role === "leader" && m.state === "running");
      const standby = members.find(
        (m) =>
          (m.role === (this.options.synchronous ? "sync_standby" : "replica") || m.role === "sync_standby") &&
          (m.state === "streaming" || m.state === "running") &&
          // caught up: a standby still replaying what it missed holds every commit that waits for it
          m.lag === 0,
      );
      if (!leader || !standby) return false;
      const client = pgClient(this.databaseUrl(), { max: 1, connect_timeout: 2, onnotice: () => {} });
      try {
        const [row] = await client<{ recovery: boolean }[]>`SELECT pg_is_in_recovery() AS recovery`;
        return row?.recovery === false;
      } catch {
        return false;
      } finally {
        await client.end({ timeout: 1 });
      }
    });
  }

  /**
   * A crash of the primary's machine: SIGKILL to its Patroni, its postmaster and every backend. The
   * standby takes the leader key once it expires (ttl) and promotes itself. After `downMs` the old
   * primary's Patroni starts again and rejoins as a standby (pg_rewind if its history diverged).
   * Resolves with the names, once the cluster is whole again.
   */
  async killPrimary(
    downMs: number,
    options: { standbyLagMs?: number } = {},
  ): Promise<{ old: string; next: string | undefined }> {
    const old = await this.leader();
    const node = this.nodes.find((n) => n.name === old);
    if (!node) throw new Error("no primary to kill");
    // The trap of asynchronous replication, made certain: the primary's walsender freezes (SIGSTOP), so
    // the standby receives nothing for `standbyLagMs` while the primary goes on with its commits, then the
    // primary dies. Synchronous: those commits wait for the standby's answer, and none is acknowledged.
    // Asynchronous: they are acknowledged, and the standby that is promoted never had them.
    if (options.standbyLagMs) {
      const senders = walSenderPids(node.dataDir);
      this.options.log(
        `freezing ${node.name}'s walsender (${senders.length}) for ${options.standbyLagMs} ms, then killing it`,
      );
      for (const pid of senders) process.kill(pid, "SIGSTOP");
      await sleep(options.standbyLagMs);
    }
    this.options.log(
      `killing the primary ${node.name} (SIGKILL to Patroni, the postmaster and its backends)`,
    );
    const postmaster = postmasterPid(node.dataDir);
    const backends = postmaster ? childrenOf(postmaster) : [];
    node.process?.kill("SIGKILL");
    for (const pid of [postmaster, ...backends]) if (pid) killQuietly(pid);
    await waitFor("a new primary", 60_000, async () => {
      const leader = await this.leader();
      return leader !== undefined && leader !== old;
    });
    const next = await this.leader();
    this.options.log(`${next} is the primary now; ${node.name} comes back in ${downMs} ms`);
    await sleep(downMs);
    this.startNode(node);
    await this.waitHealthy();
    return { old: node.name, next };
  }

  /** A planned switchover through Patroni's REST API: the leader hands over to the standby. */
  async switchover(): Promise<{ old: string; next: string }> {
    const members = await this.members();
    const leader = members.find((m) => m.role === "leader");
    const candidate = members.find((m) => m.role !== "leader");
    const node = this.nodes.find((n) => n.name === leader?.name);
    if (!leader || !candidate || !node) throw new Error("no leader and standby to switch over");
    this.options.log(`switchover ${leader.name} → ${candidate.name}`);
    const response = await fetch(`http://127.0.0.1:${node.restPort}/switchover`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ leader: leader.name, candidate: candidate.name }),
      signal: AbortSignal.timeout(60_000),
    });
    const said = await response.text();
    if (!response.ok) throw new Error(`switchover refused: ${response.status} ${said}`);
    await this.waitHealthy();
    return { old: leader.name, next: candidate.name };
  }

  /** etcd stops (SIGKILL) and starts again after `downMs`; with failsafe_mode the primary keeps serving. */
  async restartEtcd(downMs: number): Promise<void> {
    this.options.log(`restarting etcd (SIGKILL, back in ${downMs} ms)`);
    const etcd = this.etcd;
    if (etcd) {
      const exited = new Promise((resolve) => etcd.once("exit", resolve));
      etcd.kill("SIGKILL");
      await exited;
    }
    await sleep(downMs);
    this.startEtcd();
    await this.waitHealthy();
  }

  async stop(): Promise<void> {
    const stopped = (child?: ChildProcess) =>
      child && child.exitCode === null && child.signalCode === null
        ? new Promise((resolve) => {
            child.once("exit", resolve);
            child.kill("SIGTERM");
            setTimeout(() => child.kill("SIGKILL"), 15_000).unref();
          })
        : Promise.resolve();
    await stopped(this.haproxy);
    await Promise.all(this.nodes.map((node) => stopped(node.process)));
    // A postmaster whose Patroni was killed would outlive it; the folder goes once it has exited.
    const postmasters = this.nodes
      .map((node) => postmasterPid(node.dataDir))
      .filter((pid) => pid !== undefined);
    for (const pid of postmasters) killQuietly(pid);
    await waitFor("the postmasters to exit", 15_000, async () => postmasters.every((pid) => !running(pid)));
    await stopped(this.etcd);
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }

  private patroniConfig(node: Node, binDir: string) {
    const hba = [
      "local all all trust",
      "host all all 127.0.0.1/32 trust",
      "host replication all 127.0.0.1/32 trust",
    ];
    return {
      scope: "checkout",
      name: node.name,
      log: { level: "WARNING" },
      restapi: { listen: `127.0.0.1:${node.restPort}`, connect_address: `127.0.0.1:${node.restPort}` },
      etcd3: { host: `127.0.0.1:${this.etcdPorts.client}` },
      bootstrap: {
        dcs: {
          ttl: TTL_S,
          loop_wait: LOOP_WAIT_S,
          retry_timeout: RETRY_TIMEOUT_S,
          // A standby this far behind may still be promoted (Patroni's default is 1 MB): with asynchronous
          // replication, what it lacks is lost. The chaos run's lagging standby stays well under it.
          maximum_lag_on_failover: 16 * 1024 * 1024,
          synchronous_mode: this.options.synchronous,
          // The primary keeps its role while etcd is away, as long as it can reach every member itself.
          failsafe_mode: true,
          postgresql: {
            use_pg_rewind: true,
            use_slots: true,
            parameters: {
              max_connections: 300,
              wal_log_hints: "on",
              wal_keep_size: "256MB",
              max_wal_senders: 10,
              max_replication_slots: 10,
            },
            pg_hba: hba,
          },
        },
        initdb: [{ encoding: "UTF8" }, { locale: "C" }],
      },
      postgresql: {
        listen: `127.0.0.1:${node.pgPort}`,
        connect_address: `127.0.0.1:${node.pgPort}`,
        data_dir: node.dataDir,
        bin_dir: binDir,
        pgpass: path.join(path.dirname(node.dataDir), "pgpass"),
        authentication: {
          superuser: { username: "postgres", password: "postgres" },
          replication: { username: "replicator", password: "replicator" },
          rewind: { username: "postgres", password: "postgres" },
        },
        parameters: { unix_socket_directories: path.dirname(node.dataDir) },
        pg_hba: hba,
        remove_data_directory_on_rewind_failure: true,
        remove_data_directory_on_diverged_timelines: true,
      },
    };
  }

  private startEtcd(): void {
    const { client, peer } = this.etcdPorts;
    const child = spawn(
      "etcd",
      [
        "--name=etcd1",
        `--data-dir=${path.join(this.dir, "etcd")}`,
        `--listen-client-urls=http://127.0.0.1:${client}`,
        `--advertise-client-urls=http://127.0.0.1:${client}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=etcd1=http://127.0.0.1:${peer}`,
        "--log-level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ETCD_UNSUPPORTED_ARCH: process.arch } },
    );
    this.pipe(child, "etcd");
    this.etcd = child;
  }

  private startNode(node: Node): void {
    const child = spawn("patroni", [node.config], {
      stdio: ["ignore", "pipe", "pipe"],
      uid: this.owner.uid,
      gid: this.owner.gid,
      env: { ...process.env, HOME: this.owner.home, USER: this.owner.name, PGUSER: "postgres" },
    });
    this.pipe(child, node.name);
    node.process = child;
  }

  private startHaproxy(): void {
    const config = path.join(this.dir, "haproxy.cfg");
    const servers = this.nodes
      .map((n) => `  server ${n.name} 127.0.0.1:${n.pgPort} maxconn 400 check port ${n.restPort}`)
      .join("\n");
    const apps = this.options.appPorts
      .map((port, i) => `  server app${String.fromCharCode(65 + i)} 127.0.0.1:${port} check`)
      .join("\n");
    writeFileSync(
      config,
      `global
  maxconn 4000
  # One line per request of the app frontend (which instance, how long): the run's log folder keeps them.
  log stdout format raw local0 info

defaults
  timeout connect 2s
  # Idle database connections (pools, graphile-worker's LISTEN) stay open for hours.
  timeout client 1h
  timeout server 1h
  timeout check 1s

# PostgreSQL: only the node whose Patroni answers 200 on /primary gets connections; when that changes,
# the sessions to the old one are cut at once, so no client keeps writing to a demoted node.
listen postgres
  bind 127.0.0.1:${this.postgresFrontend}
  mode tcp
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
${servers}
${
  apps
    ? `
# The app instances: round robin; a request that finds an instance gone goes to the other one.
listen app
  bind 127.0.0.1:${this.appFrontend}
  mode http
  log global
  option httplog
  balance roundrobin
  option redispatch
  retries 3
  retry-on conn-failure empty-response
  timeout client 60s
  timeout server 60s
  default-server inter 500ms fall 1 rise 1
${apps}
`
    : ""
}`,
    );
    const child = spawn("haproxy", ["-f", config, "-db"], { stdio: ["ignore", "pipe", "pipe"] });
    this.pipe(child, "haproxy");
    this.haproxy = child;
  }

  private pipe(child: ChildProcess, name: string): void {
    const file = path.join(this.logDir, `${name}.log`);
    const write = (chunk: Buffer) => appendFileSync(file, chunk);
    child.stdout?.on("data", write);
    child.stderr?.on("data", write);
    child.once("exit", (code, signal) => appendFileSync(file, `\n[${name} exited: ${signal ?? code}]\n`));
  }
}

/** The commands the stack needs, from Debian's packages (`apt-get install -y patroni etcd-server haproxy`). */
export function missingTools(): string[] {
  const missing: string[] = [];
  for (const tool of ["patroni", "etcd", "haproxy"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      missing.push(tool);
    }
  }
  try {
    postgresBinDir();
  } catch {
    missing.push("postgresql (server binaries)");
  }
  return missing;
}

/** The newest PostgreSQL server installed from Debian's packages. */
function postgresBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, "bin", "postgres")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0]) throw new Error(`no PostgreSQL server under ${root}`);
  return path.join(root, versions[0], "bin");
}

/** As root, the nodes run as `postgres` (PostgreSQL refuses root); otherwise as whoever runs this. */
function postgresOwner(): { uid: number; gid: number; home: string; name: string } {
  const info = os.userInfo();
  if (info.uid !== 0) return { uid: info.uid, gid: info.gid, home: info.homedir, name: info.username };
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  const [, , uid, gid, , home] = line?.split(":") ?? [];
  if (!uid || !gid) throw new Error("running as root, and there is no postgres user to run PostgreSQL as");
  return { uid: Number(uid), gid: Number(gid), home: home ?? "/var/lib/postgresql", name: "postgres" };
}

function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** The walsenders of a primary: the children of its postmaster whose title says so. */
function walSenderPids(dataDir: string): number[] {
  const postmaster = postmasterPid(dataDir);
  if (!postmaster) return [];
  return childrenOf(postmaster).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("walsender");
    } catch {
      return false;
    }
  });
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Running, as opposed to gone or a zombie nobody reaped yet. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\S+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(what: string, timeoutMs: number, ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await ready()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(250);
  }
}
