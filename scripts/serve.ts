/** The production server's entry point (src/host/server.ts), run under tsx. */
import "~/host/server";
