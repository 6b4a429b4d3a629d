import net from "node:net";
import { listenInFront, serverConnector } from "../pg-proxy-ends";

/**
 * A gate between one actor's database connections and PostgreSQL: a TCP proxy that reads the wire protocol
 * both ways and holds each statement the actor sends until the scheduler lets it through. The actor's code
 * runs unchanged, on its own connection pool pointed at the gate's address.
 *
 * A step is what one Sync (or a simple Query) closes, when it carries an Execute: one statement, with its
 * Bind. What carries none (Parse, Describe, Flush: a statement prepared the first time it is used) passes at
 * once; so does everything before the connection's first ReadyForQuery (start-up, authentication). Messages
 * of one connection keep their order: what follows a held step waits behind it.
 *
 * From the server it reads BackendKeyData (the backend's pid, which the scheduler asks the server about),
 * CommandComplete and ErrorResponse (what a step did), and ReadyForQuery (the step is over).
 */

export interface Step {
  /** The statement, as prepared (or sent as a simple query). */
  text: string;
  /** What the server answered: the command's tag ("UPDATE 1"), or the error's SQLSTATE. */
  outcome?: string;
  /** Its ReadyForQuery came: the step is over. */
  done: boolean;
}

/** One client connection through the gate. */
export interface GatedConnection {
  /** In the order the actor opened them. */
  index: number;
  /** The backend's process id; 0 until the server sent it. */
  pid: number;
  /** The step at the head of this connection's queue, held; undefined when none waits. */
  readonly waiting: Step | undefined;
  /** The step let through and not yet answered. */
  readonly running: Step | undefined;
}

export interface Gate {
  /** The connection string that reaches the server through this gate. */
  url: string;
  connections: GatedConnection[];
  /** Open: every step passes at once (set-up, warm-up); closed: steps wait for `release`. */
  open: boolean;
  /** Lets the waiting step of one connection through. */
  release(connection: GatedConnection): Step;
  /** Called whenever something arrives: a step to hold, an answer, a new connection. */
  onChange: () => void;
  /** Every step sent on to the server, in order, open or not (a count of an action's statements reads it). */
  passed: Step[];
  close(): Promise<void>;
}

interface Batch {
  bytes: Buffer[];
  step: Step | undefined;
  /** It ends with Sync or a simple Query: ReadyForQuery answers it. */
  synced: boolean;
}

interface Connection extends GatedConnection {
  queue: Batch[];
  /** One entry per Sync or Query sent on, in order: the step each ReadyForQuery answers (or none). */
  answering: (Step | undefined)[];
  /** The statement each prepared name stands for. */
  prepared: Map<string, string>;
  send(batch: Batch): void;
}

const SSL_REQUEST = 80877103;

export async function startGate(databaseUrl: string): Promise<Gate> {
  const connectTarget = serverConnector(databaseUrl);
  const sockets = new Set<net.Socket>();

  const gate: Gate = {
    url: "",
    connections: [],
    open: true,
    onChange: () => {},
    passed: [],
    release(connection) {
      const conn = connection as Connection;
      const head = conn.queue[0];
      if (!head?.step) throw new Error(`connection ${conn.index} has no step waiting`);
      conn.queue.shift();
      conn.send(head);
      flush(conn);
      return head.step;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };

  /** Sends on what need not wait: everything when the gate is open, else up to the first step. */
  const flush = (conn: Connection) => {
    while (conn.queue.length > 0) {
      const head = conn.queue[0] as Batch;
      if (head.step && !gate.open) break;
      conn.queue.shift();
      conn.send(head);
    }
  };

  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const upstream = connectTarget();
    sockets.add(client).add(upstream);
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) socket.on("close", closeBoth).on("error", closeBoth);

    let ready = false;
    let current: Batch = { bytes: [], step: undefined, synced: false };
    const conn: Connection = {
      index: gate.connections.length,
      pid: 0,
      queue: [],
      answering: [],
      prepared: new Map(),
      get waiting() {
        const head = this.queue[0];
        return head?.step;
      },
      get running() {
        return this.answering.find((step) => step !== undefined && !step.done);
      },
      send(batch) {
        if (batch.synced) this.answering.push(batch.step);
        if (batch.step) gate.passed.push(batch.step);
        upstream.write(Buffer.concat(batch.bytes));
      },
    };
    gate.connections.push(conn);

    // Client to server: the start-up message has no type byte; every later one does.
    let fromClient = Buffer.alloc(0);
    let started = false;
    client.on("data", (data: Buffer) => {
      fromClient = Buffer.concat([fromClient, data]);
      for (;;) {
        if (!started) {
          if (fromClient.length < 8) break;
          const length = fromClient.readInt32BE(0);
          if (fromClient.length < length) break;
          if (fromClient.readInt32BE(4) === SSL_REQUEST) throw new Error("the gate does not speak TLS");
          upstream.write(fromClient.subarray(0, length));
          fromClient = fromClient.subarray(length);
          started = true;
          continue;
        }
        if (fromClient.length < 5) break;
        const length = fromClient.readInt32BE(1);
        if (fromClient.length < length + 1) break;
        const message = fromClient.subarray(0, length + 1);
        fromClient = fromClient.subarray(length + 1);
        const type = String.fromCharCode(message[0] as number);
        if (!ready) {
          upstream.write(message);
          continue;
        }
        current.bytes.push(message);
        const body = message.subarray(5);
        if (type === "P") {
          const [name = "", text = ""] = cStrings(body, 2);
          conn.prepared.set(name, text);
        } else if (type === "B") {
          const [, statement = ""] = cStrings(body, 2);
          current.step = { text: conn.prepared.get(statement) ?? "", done: false };
        } else if (type === "Q") {
          current.step = { text: cStrings(body, 1)[0] ?? "", done: false };
        }
        if (type === "E" && !current.step) current.step = { text: conn.prepared.get("") ?? "", done: false };
        // A Bind alone is no step (Describe-only); an Execute or a Query makes one.
        const executes = current.bytes.some((m) => m[0] === 0x45 || m[0] === 0x51);
        if (type === "S" || type === "Q" || type === "H" || type === "X") {
          current.synced = type === "S" || type === "Q";
          if (!executes) current.step = undefined;
          conn.queue.push(current);
          current = { bytes: [], step: undefined, synced: false };
          flush(conn);
          gate.onChange();
        }
      }
    });

    // Server to client: passed on at once, read on the way.
    let fromServer = Buffer.alloc(0);
    upstream.on("data", (data: Buffer) => {
      client.write(data);
      fromServer = Buffer.concat([fromServer, data]);
      let changed = false;
      for (;;) {
        if (fromServer.length < 5) break;
        const length = fromServer.readInt32BE(1);
        if (fromServer.length < length + 1) break;
        const type = String.fromCharCode(fromServer[0] as number);
        const body = fromServer.subarray(5, length + 1);
        fromServer = fromServer.subarray(length + 1);
        // Answers come in the order their Syncs went: the first in line is the one being answered.
        const answering = conn.answering[0];
        if (type === "K") {
          conn.pid = body.readInt32BE(0);
        } else if (type === "C" && answering) {
          answering.outcome = cStrings(body, 1)[0] ?? "";
        } else if (type === "E" && answering) {
          answering.outcome = `ERROR ${errorField(body, "C")}`;
        } else if (type === "Z") {
          if (!ready) {
            ready = true;
          } else {
            const step = conn.answering.shift();
            if (step) {
              step.outcome ??= "OK";
              step.done = true;
            }
            changed = true;
          }
        }
      }
      if (changed) gate.onChange();
    });
  });
  gate.url = await listenInFront(server, databaseUrl);
  return gate;
}

/** The first `count` NUL-terminated strings of a message body. */
function cStrings(body: Buffer, count: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < count && at < body.length; i++) {
    const end = body.indexOf(0, at);
    if (end < 0) break;
    out.push(body.toString("utf8", at, end));
    at = end + 1;
  }
  return out;
}

/** One field of an ErrorResponse ("C": its SQLSTATE). */
function errorField(body: Buffer, code: string): string {
  let at = 0;
  while (at < body.length && body[at] !== 0) {
    const type = String.fromCharCode(body[at] as number);
    const end = body.indexOf(0, at + 1);
    if (type === code) return body.toString("utf8", at + 1, end);
    at = end + 1;
  }
  return "";
}
