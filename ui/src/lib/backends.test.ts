import { describe, expect, it } from "vitest";
import { backendLabel, choosesKv, kvOnlyNote, kvTypesOf } from "./backends";

describe("backends, as Rust's table gives them", () => {
  it("names each backend as people read it, and a server by its own name", () => {
    expect(["llama", "candle", "mlx", "lab"].map(backendLabel)).toEqual(["llama.cpp", "candle", "MLX", "lab"]);
  });
  it("offers cache types only where the backend takes them", () => {
    expect(kvTypesOf("llama")).toEqual(["f16", "q8_0", "q4_0"]);
    expect(["llama", "candle", "mlx", "lab"].map(choosesKv)).toEqual([true, false, false, false]);
    expect(kvOnlyNote()).toBe("llama.cpp only: candle and MLX keep f32 caches, servers set theirs when started");
  });
});
