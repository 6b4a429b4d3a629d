import { startAppProcess } from "../../scripts/lib/app-process";
import { freePort } from "../../scripts/lib/free-port";

export { freePort };

export const TEST_SERVER_WEBHOOK_SECRET = "whsec_test_server_0123456789abcdefghijkl";
export const TEST_SERVER_ADMIN_TOKEN = "test-server-admin-token-0123456789abcdef";
export const TEST_SERVER_SESSION_SECRET = "test-server-session-secret-0123456789abcdef";

export interface AppServer {
  baseUrl: string;
  /** The server process (its memory can be read in /proc). */
  pid: number;
  /** What it printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** The real production server (scripts/serve.ts, the built app) on its own port, against the given database. */
export async function startAppServer(options: {
  databaseUrl: string;
  env?: Record<string, string>;
  /** Options for node itself (a probe to preload). */
  nodeArgs?: string[];
  /** scripts/serve.ts under tsx instead of its bundle. */
  fromSource?: boolean;
}): Promise<AppServer> {
  const server = await startAppProcess({
    port: await freePort(),
    capture: true,
    nodeArgs: options.nodeArgs,
    fromSource: options.fromSource,
    env: {
      DATABASE_URL: options.databaseUrl,
      DB_POOL_MAX: "10",
      LOG_LEVEL: "warn",
      IDEMPOTENCY_CLEANUP_INTERVAL_MS: "0",
      PAYMENT_QUERY_INTERVAL_MS: "0",
      WORKER_IN_APP: "false",
      // These servers prove the guarantees without the gateway; test/gateway.test.ts covers it.
      GATEWAY_ENABLED: "false",
      ADMIN_TOKEN: TEST_SERVER_ADMIN_TOKEN,
      PROVIDER_WEBHOOK_SECRET: TEST_SERVER_WEBHOOK_SECRET,
      SESSION_SECRET: TEST_SERVER_SESSION_SECRET,
      ...options.env,
    },
  });
  return {
    baseUrl: server.baseUrl,
    pid: server.child.pid ?? 0,
    output: server.output,
    stop: () => server.stop(5_000),
  };
}

/** A minimal tRPC-over-HTTP client for one shopper (one cookie), as a browser or curl would be. */
export class HttpShopper {
  private cookie = "";
  constructor(private readonly baseUrl: string) {}

  get sessionCookie(): string {
    return this.cookie;
  }

  async visit(path = "/"): Promise<Response> {
    const response = await fetch(`${this.baseUrl}${path}`, { headers: this.headers() });
    this.remember(response);
    return response;
  }

  async mutation(path: string, input: unknown, baseUrl = this.baseUrl) {
    const response = await fetch(`${baseUrl}/api/trpc/${path}`, {
      method: "POST",
      headers: { ...this.headers(), "content-type": "application/json" },
      body: JSON.stringify({ json: input }),
    });
    this.remember(response);
    return { status: response.status, headers: response.headers, body: (await response.json()) as TrpcBody };
  }

  async query(path: string, input?: unknown) {
    const search = input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify({ json: input }))}`;
    const response = await fetch(`${this.baseUrl}/api/trpc/${path}${search}`, { headers: this.headers() });
    this.remember(response);
    return { status: response.status, body: (await response.json()) as TrpcBody };
  }

  useCookie(cookie: string) {
    this.cookie = cookie;
  }

  private headers(): Record<string, string> {
    return this.cookie ? { cookie: this.cookie } : {};
  }

  private remember(response: Response) {
    const set = response.headers.get("set-cookie");
    if (set) this.cookie = set.split(";")[0] ?? "";
  }
}

export interface TrpcBody {
  result?: { data: { json: Record<string, unknown> } };
  error?: {
    json: { message: string; data: { code: string; httpStatus: number; domainCode: string | null } };
  };
}
