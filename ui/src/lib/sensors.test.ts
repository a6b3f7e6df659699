import { describe, expect, it } from "vitest";
import type { SensorReading, SensorsOpened } from "../ipc/types";
import { describeSensors } from "./sensors";

const vm: SensorsOpened = {
  type: "sensorsOpened",
  sources: ["CPU clock: /proc/cpuinfo (the kernel's figure; a virtual machine may report a fixed one)"],
  not_available: ["CPU package power: no powercap/RAPL here", "GPU power and clocks: no NVIDIA driver library here"],
  every_ms: 250,
};
const gpuBox: SensorsOpened = { type: "sensorsOpened", sources: ["CPU clock: cpufreq, 16 cores", "NVIDIA (NVML): GPU 0 NVIDIA H200: power, energy"], not_available: ["CPU package power: readable by root only"], every_ms: 250 };
const reading = (r: Partial<SensorReading>): SensorReading => ({ type: "sensors", at_ms: 1000, cpu_mhz: null, gpu_mhz: null, temp_c: null, power_w: null, throttling: [], ...r });

describe("the sensor strip's words", () => {
  it("says power is not available where nothing gives it, and never shows a zero", () => {
    const w = describeSensors(vm, reading({ cpu_mhz: 2596.142 }));
    expect(w.caption).toBe("CPU clock 2,596 MHz · power: not available here");
    expect(w.missing).toEqual(vm.not_available);
    expect(w.throttling).toEqual([]);
  });

  it("gives the GPU's clock, temperature and power, and throttling while it lasts", () => {
    const w = describeSensors(gpuBox, reading({ cpu_mhz: 3100, gpu_mhz: 1755, temp_c: 71, power_w: 698.44, throttling: ["GPU 0 clocks held back by power cap"] }));
    expect(w.caption).toBe("GPU clock 1,755 MHz · CPU clock 3,100 MHz · 71 °C · power 698.4 W");
    expect(w.throttling).toEqual(["GPU 0 clocks held back by power cap"]);
    // The first reading has no interval behind it: no power figure yet, and no zero.
    expect(describeSensors(gpuBox, reading({ gpu_mhz: 1980 })).caption).toBe("GPU clock 1,980 MHz");
  });

  it("waits for a session before saying anything", () => {
    expect(describeSensors(null, undefined).caption).toBe("Sensors: waiting for Go live.");
    expect(describeSensors(vm, undefined).caption).toBe("power: not available here");
  });
});
