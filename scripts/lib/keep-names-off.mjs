/**
 * Registered after tsx (`node --import tsx --import ./scripts/lib/keep-names-off.mjs`): the production server's
 * TypeScript compiled without esbuild's keepNames (./keep-names-off-hooks.mjs). tsx compiles every module with
 * keepNames on, which wraps each function a binding or a property names (`const f = () => …`,
 * `{ render: (x) => … }`, a nested function) in `__name(fn, "f")`: an `Object.defineProperty` on the function
 * each time the expression runs, some thousands of instructions, on every request for every closure it
 * creates (`npm run bench -- --instructions` counted a tenth of a replay's). Without it the engine names those
 * functions itself, from their bindings. `test/keep-names-off.test.ts` holds both.
 */
import { register } from "node:module";

register("./keep-names-off-hooks.mjs", import.meta.url);
