import net from "node:net";
import { listenInFront, serverConnector } from "../../scripts/lib/pg-proxy-ends";

/**
 * A TCP proxy in front of the test database that can kill a connection the way
 * the server does when a backend is terminated (a FATAL 57P01, then the socket
 * closes) at a chosen moment: when the client sends a statement containing some text.
 * The real server, reached through it, does everything else.
 */
export interface PgProxy {
  /** The database URL, through the proxy. */
  url: string;
  /** The next `count` client messages containing `text` get a FATAL instead of an answer. */
  killOn(text: string, count?: number): void;
  /**
   * The next `count` client messages containing `text` are answered first with a row no query
   * asked for (a DataRow out of step with the protocol), then passed on.
   */
  strayRowOn(text: string, count?: number): void;
  /**
   * Every connection open now goes silent for good, both ways, and is never closed: what a client sees of a
   * server that froze or was cut off (a failover that left its sessions hanging). New connections work.
   * Returns how many were frozen.
   */
  freezeAll(): number;
  /**
   * The connections that send the next `count` client messages containing `text` go silent as freezeAll's do
   * (that message is not passed on); the others go on.
   */
  freezeOn(text: string, count?: number): void;
  /** How many connections freezeOn froze so far. */
  readonly frozenOn: number;
  /** New connections reach the server only after this long (a starved or distant server); 0: at once. */
  slowConnects(ms: number): void;
  /** How many connections were killed so far. */
  readonly killed: number;
  close(): Promise<void>;
}

/** The ErrorResponse that pg_terminate_backend() makes the server send before closing. */
function terminatedByAdministrator(): Buffer {
  const fields = [
    ["S", "FATAL"],
    ["V", "FATAL"],
    ["C", "57P01"],
    ["M", "terminating connection due to administrator command"],
    ["R", "ProcessInterrupts"],
  ];
  const body = Buffer.concat([
    ...fields.map(([tag, value]) => Buffer.from(`${tag}${value}\0`, "utf8")),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write("E", 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** A DataRow of one column holding "1". */
function strayDataRow(): Buffer {
  const body = Buffer.alloc(2 + 4 + 1);
  body.writeInt16BE(1, 0);
  body.writeInt32BE(1, 2);
  body.write("1", 6);
  const header = Buffer.alloc(5);
  header.write("D", 0);
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

export async function startPgProxy(databaseUrl: string): Promise<PgProxy> {
  const connectTarget = serverConnector(databaseUrl);

  let trigger: { text: string; remaining: number } | undefined;
  let stray: { text: string; remaining: number } | undefined;
  let freezeTrigger: { text: string; remaining: number } | undefined;
  let killed = 0;
  let frozenOn = 0;
  const sockets = new Set<net.Socket>();
  /** Each open connection's switch: once frozen, nothing passes either way. */
  const freezers = new Set<() => void>();
  let connectDelayMs = 0;
  const server = net.createServer((client) => {
    if (connectDelayMs === 0) return wire(client);
    // Held, its bytes kept, until the delay is over.
    client.pause();
    sockets.add(client);
    setTimeout(() => {
      if (client.destroyed) return;
      wire(client);
      client.resume();
    }, connectDelayMs).unref();
  });
  const wire = (client: net.Socket) => {
    const upstream = connectTarget();
    sockets.add(client).add(upstream);
    let frozen = false;
    const freeze = () => {
      frozen = true;
    };
    freezers.add(freeze);
    // Either side gone ends the other.
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const socket of [client, upstream]) socket.on("close", closeBoth).on("error", closeBoth);
    client.on("close", () => freezers.delete(freeze));
    upstream.on("data", (data) => {
      if (!frozen) client.write(data);
    });
    client.on("data", (data) => {
      if (frozen) return;
      if (freezeTrigger && freezeTrigger.remaining > 0 && data.includes(freezeTrigger.text)) {
        freezeTrigger.remaining--;
        frozenOn++;
        freeze();
        return;
      }
      if (trigger && trigger.remaining > 0 && data.includes(trigger.text)) {
        trigger.remaining--;
        killed++;
        // The FATAL must reach the client before its socket closes.
        upstream.removeAllListeners("close").on("error", () => {});
        upstream.destroy();
        client.end(terminatedByAdministrator());
        return;
      }
      if (stray && stray.remaining > 0 && data.includes(stray.text)) {
        stray.remaining--;
        client.write(strayDataRow());
      }
      upstream.write(data);
    });
  };
  const url = await listenInFront(server, databaseUrl);

  return {
    url,
    killOn(text, count = 1) {
      trigger = { text, remaining: count };
    },
    strayRowOn(text, count = 1) {
      stray = { text, remaining: count };
    },
    freezeOn(text, count = 1) {
      freezeTrigger = { text, remaining: count };
    },
    get frozenOn() {
      return frozenOn;
    },
    freezeAll() {
      const count = freezers.size;
      for (const freeze of freezers) freeze();
      freezers.clear();
      return count;
    },
    slowConnects(ms) {
      connectDelayMs = ms;
    },
    get killed() {
      return killed;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
