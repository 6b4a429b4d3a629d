import net from "node:net";

/**
 * The two ends of a proxy in front of PostgreSQL (the permutation harness's gates, the tests' fault proxy):
 * how it reaches the server a connection string names (a TCP address, or libpq's Unix-socket form
 * `?host=/socket/dir`), and the connection string that reaches the server through it instead.
 */
export function serverConnector(databaseUrl: string): () => net.Socket {
  const target = new URL(databaseUrl);
  const socketDir = target.searchParams.get("host");
  const port = Number(target.port || 5432);
  return () =>
    socketDir?.startsWith("/")
      ? net.connect({ path: `${socketDir}/.s.PGSQL.${port}` })
      : net.connect({ host: target.hostname, port });
}

/** Listens on a free loopback port; resolves with the connection string through it. */
export async function listenInFront(server: net.Server, databaseUrl: string): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  const url = new URL(databaseUrl);
  url.searchParams.delete("host");
  url.hostname = "127.0.0.1";
  url.port = String(address.port);
  return url.toString();
}
