/** How many times each fault was injected (or each recovery happened). */
export class Faults {
  private readonly counts = new Map<string, number>();

  count(name: string, by = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + by);
  }

  entries(): [string, number][] {
    return [...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b));
  }
}

export interface InvariantCheck {
  name: string;
  /** How many things were checked (orders, keys, refunds…). */
  checked: number;
  violations: string[];
}

export class Invariants {
  readonly checks: InvariantCheck[] = [];

  check(name: string, checked: number, violations: string[]): void {
    this.checks.push({ name, checked, violations });
  }

  get violationCount(): number {
    return this.checks.reduce((n, c) => n + c.violations.length, 0);
  }
}

export function printReport(faults: Faults, invariants: Invariants, log: (line: string) => void): void {
  log("faults injected");
  for (const [name, n] of faults.entries()) log(`  ${String(n).padStart(6)}  ${name}`);
  log("invariants");
  for (const check of invariants.checks) {
    const mark = check.violations.length === 0 ? "ok  " : "FAIL";
    log(`  ${mark} ${check.name} (${check.checked} checked, ${check.violations.length} violations)`);
    for (const violation of check.violations.slice(0, 20)) log(`         ✗ ${violation}`);
    if (check.violations.length > 20) log(`         … and ${check.violations.length - 20} more`);
  }
}
