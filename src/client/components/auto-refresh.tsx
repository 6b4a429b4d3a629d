"use client";
import { useRouter } from "next/navigation";
import { useEffect } from "react";

/** Re-renders the server page while deliveries are still running. */
export function AutoRefresh({ active, intervalMs = 1500 }: { active: boolean; intervalMs?: number }) {
  const router = useRouter();
  useEffect(() => {
    if (!active) return;
    const id = setInterval(() => router.refresh(), intervalMs);
    return () => clearInterval(id);
  }, [active, intervalMs, router]);
  return active ? (
    <p className="muted small">Deliveries in progress; this page refreshes by itself.</p>
  ) : null;
}
