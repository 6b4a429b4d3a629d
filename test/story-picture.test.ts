import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, test } from "vitest";
import { placeMarks, StoryPicture, type StoryView } from "~/client/components/story-picture";

/**
 * The story's picture keeps copies in the same second apart (issue 25, part 4): MockPay's lane once drew
 * one processed and two absorbed deliveries as a single ring labelled "2", the effect hidden under them.
 */
const at = new Date("2026-12-05T10:00:00Z");
const conditional = "the conditional update PENDING → SUCCESS matched no row: the payment is already SUCCESS";
const provider = {
  layer: "provider",
  title: "MockPay notifications",
  summary: "3 delivered, 1 processed, 2 answered as duplicates",
  marks: [
    { at, count: 2, outcome: "DUPLICATE", what: "payment.succeeded", effect: false, absorbedBy: conditional },
    { at, count: 1, outcome: "PROCESSED", what: "payment.succeeded", effect: true, absorbedBy: "" },
  ],
  absorbers: [{ by: conditional, count: 2 }],
};

describe("the story's picture", () => {
  test("one effect and two absorbed copies in one second are two marks side by side, the effect first", () => {
    const placed = placeMarks(provider.marks);
    expect(placed.map((m) => [m.effect, m.count, m.slot > 0])).toEqual([
      [true, 1, false],
      [false, 2, true],
    ]);
    // Far enough apart that neither covers the other.
    const [effect, absorbed] = placed;
    expect((absorbed?.slot ?? 0) - (effect?.slot ?? 0)).toBeGreaterThan(
      (effect?.r ?? 0) + (absorbed?.r ?? 0),
    );
  });

  test("copies absorbed by different things in one second are a mark each", () => {
    const marks = [
      {
        at,
        count: 3,
        outcome: "replayed",
        what: "order.create",
        effect: false,
        absorbedBy: "the replay cache",
      },
      {
        at,
        count: 1,
        outcome: "waited",
        what: "order.create",
        effect: false,
        absorbedBy: "the record's lease",
      },
      { at, count: 1, outcome: "first", what: "order.create", effect: true, absorbedBy: "" },
    ];
    expect(placeMarks(marks).map((m) => m.absorbedBy)).toEqual([
      "",
      "the record's lease",
      "the replay cache",
    ]);
  });

  test("drawn, each absorbed mark names what absorbed it, and the table lists the absorbers", () => {
    const story: StoryView = { lanes: [provider], absorbed: 2 };
    const html = renderToStaticMarkup(createElement(StoryPicture, { story }));
    const circles = [...html.matchAll(/<circle cx="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(circles).toHaveLength(2);
    expect(new Set(circles).size).toBe(2);
    expect(html).toContain(`data-absorbed-by="${conditional}"`);
    expect(html).toContain(`absorbed by ${conditional}`);
    expect(html).toContain("took effect");
    expect(html).toMatch(new RegExp(`<li>2 × ${conditional}</li>`));
  });
});
