export async function register() {
  // Next's documented way to keep Node-only code out of the edge bundle.
  if (process.env.NEXT_RUNTIME === "nodejs") {
    const { startBackgroundJobs } = await import("./host/background-jobs");
    startBackgroundJobs();
  }
}
