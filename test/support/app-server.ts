import { type ChildProcess, spawn } from "node:child_process";
import { NEXT_BIN } from "../../scripts/lib/build";
import { freePort } from "../../scripts/lib/free-port";

export { freePort };

export const TEST_SERVER_WEBHOOK_SECRET = "whsec_test_server_0123456789";
export const TEST_SERVER_ADMIN_TOKEN = "test-server-admin-token";

export interface AppServer {
  baseUrl: string;
  stop(): Promise<void>;
}

/** A real `next start` of the production build, on its own port, against the given database. */
export async function startAppServer(options: {
  databaseUrl: string;
  env?: Record<string, string>;
}): Promise<AppServer> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [NEXT_BIN, "start", "-p", String(port), "-H", "127.0.0.1"],
    {
      env: {
        ...process.env,
        DATABASE_URL: options.databaseUrl,
        NEXT_TELEMETRY_DISABLED: "1",
        DB_POOL_MAX: "10",
        LOG_LEVEL: "warn",
        IDEMPOTENCY_CLEANUP_INTERVAL_MS: "0",
        PAYMENT_QUERY_INTERVAL_MS: "0",
        WORKER_IN_APP: "false",
        // These servers prove the guarantees without the gateway; test/gateway.test.ts covers it.
        GATEWAY_ENABLED: "false",
        ADMIN_TOKEN: TEST_SERVER_ADMIN_TOKEN,
        PROVIDER_WEBHOOK_SECRET: TEST_SERVER_WEBHOOK_SECRET,
        ...options.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`next start exited early:\n${output}`);
    try {
      const response = await fetch(`${baseUrl}/api/trpc/catalog.list`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`next start did not become ready:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    baseUrl,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
      }),
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
