import { describe, expect, it } from "vitest";
import { PendingQueue } from "../../control-plane/src/events/pending-queue.ts";

describe("PendingQueue", () => {
  it("keeps FIFO order through compaction, a put-back in front and a filtered removal", () => {
    const q = new PendingQueue<number>();
    for (let i = 0; i < 3000; i++) q.push(i);
    for (let i = 0; i < 2000; i++) expect(q.shift()).toBe(i); // compacts on the way
    expect(q.size).toBe(1000);
    q.unshift(1999);
    expect(q.size).toBe(1001);
    expect(q.remove((x) => x % 2 === 1)).toHaveLength(501); // 1999 and the 500 odd ones from 2001
    const rest: number[] = [];
    for (let x = q.shift(); x !== undefined; x = q.shift()) rest.push(x);
    expect(rest).toEqual(Array.from({ length: 500 }, (_, i) => 2000 + 2 * i));
    expect(q.size).toBe(0);
    q.unshift(7); // into an empty queue
    expect([q.shift(), q.shift()]).toEqual([7, undefined]);
  });
});
