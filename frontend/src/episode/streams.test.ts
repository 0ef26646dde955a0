import { describe, expect, it } from "vitest";
import { ApiError } from "../api";
import { asksAgainAfter } from "./streams";

describe("asking for a live desktop's stream again", () => {
  it("stops at the server's 409: the episode ended, or its desktop is not its own", () => {
    const ended = new ApiError(409, "episode_error", "This episode has ended; its desktop is not streamed.");
    expect(asksAgainAfter(ended)).toBe(false);
  });

  it("goes on after a network failure or another answer", () => {
    expect(asksAgainAfter(new TypeError("Failed to fetch"))).toBe(true);
    expect(asksAgainAfter(new ApiError(502, "error", "502 Bad Gateway"))).toBe(true);
    expect(asksAgainAfter(new ApiError(500, "error", "server error"))).toBe(true);
  });
});
