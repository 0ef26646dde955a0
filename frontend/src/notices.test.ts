import { describe, expect, it } from "vitest";
import { assignedText, isTasksAssigned, noticesUrl, parseNotice } from "./notices";

describe("assignment notices", () => {
  it("are read from the socket's text and said to the annotator", () => {
    const notice = parseNotice('{"event": "tasks_assigned", "payload": {"count": 2, "task_ids": [4, 5], "by": "mona"}}');
    expect(notice && isTasksAssigned(notice)).toBe(true);
    if (notice && isTasksAssigned(notice)) expect(assignedText(notice)).toBe("mona assigned 2 tasks to you.");
    const one = { event: "tasks_assigned" as const, payload: { count: 1, task_ids: [4], by: "mona" } };
    expect(assignedText(one)).toBe("mona assigned a task to you.");
  });

  it("other events and text that is not a notice are told apart", () => {
    const hello = parseNotice('{"event": "hello", "payload": {"username": "ann"}}');
    expect(hello && isTasksAssigned(hello)).toBe(false);
    expect(parseNotice("not json")).toBeNull();
    expect(parseNotice("[1]")).toBeNull();
  });

  it("come over the page's own host", () => {
    expect(noticesUrl({ protocol: "https:", host: "tandem.example" })).toBe("wss://tandem.example/ws/notifications/");
    expect(noticesUrl({ protocol: "http:", host: "127.0.0.1:8000" })).toBe("ws://127.0.0.1:8000/ws/notifications/");
  });
});
