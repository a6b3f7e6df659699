/**
 * Types of what the app's commands take and return. Every shape is generated from the Rust
 * type that (de)serializes it (`./generated/`, written by `scripts/gen-types`; the app's
 * tests fail while it is stale): nothing here declares a field. What this file adds are
 * names for parts of those types and the UI's own error for a failed call.
 */
import type { CmdError } from "./generated/CmdError";
import type { LiveEvent } from "./generated/LiveEvent";
import type { Policy } from "./generated/Policy";

export type { Advice } from "./generated/Advice";
export type { AdviseEvent } from "./generated/AdviseEvent";
export type { BackendAvailability } from "./generated/BackendAvailability";
export type { BackendInfo } from "./generated/BackendInfo";
export type { BackendState } from "./generated/BackendState";
export type { Capabilities } from "./generated/Capabilities";
export type { Capacity } from "./generated/Capacity";
export type { CatalogModel } from "./generated/CatalogModel";
export type { CheckRow } from "./generated/CheckRow";
export type { CmdError } from "./generated/CmdError";
export type { DeadlineRecord } from "./generated/DeadlineRecord";
export type { Distribution } from "./generated/Distribution";
export type { ExportSource } from "./generated/ExportSource";
export type { Candidate } from "./generated/Candidate";
export type { Fidelity } from "./generated/Fidelity";
export type { FidelityEvent } from "./generated/FidelityEvent";
export type { FidelityRun } from "./generated/FidelityRun";
export type { FinishReason } from "./generated/FinishReason";
export type { HardwareReport } from "./generated/HardwareReport";
export type { Drafter } from "./generated/Drafter";
export type { KvType } from "./generated/KvType";
export type { Length } from "./generated/Length";
export type { Limits } from "./generated/Limits";
export type { LiveEvent } from "./generated/LiveEvent";
export type { LiveSettings } from "./generated/LiveSettings";
export type { ModelFacts } from "./generated/ModelFacts";
export type { ModelInfo } from "./generated/ModelInfo";
export type { GalleryShown } from "./generated/GalleryShown";
export type { OpenedRun } from "./generated/OpenedRun";
export type { Sustained } from "./generated/Sustained";
export type { PointCeiling } from "./generated/PointCeiling";
export type { PointFigures } from "./generated/PointFigures";
export type { PointSpec } from "./generated/PointSpec";
export type { Policy } from "./generated/Policy";
export type { PrefillSpan } from "./generated/PrefillSpan";
export type { TransferSpan } from "./generated/TransferSpan";
export type { PresetRecord } from "./generated/PresetRecord";
export type { Progress as FetchEvent } from "./generated/Progress";
export type { SearchRecord } from "./generated/SearchRecord";
export type { ServerSpec } from "./generated/ServerSpec";
export type { SettingKey } from "./generated/SettingKey";
export type { SettingSummary } from "./generated/SettingSummary";
export type { SweepEvent } from "./generated/SweepEvent";
export type { SweepOptions } from "./generated/SweepOptions";
export type { Trial } from "./generated/Trial";
export type { SweepPlan } from "./generated/SweepPlan";
export type { TuneEvent } from "./generated/TuneEvent";
export type { TuneStatus } from "./generated/TuneStatus";

/** The policies in the order the UI offers them (`satisfies` keeps it in step with Rust's). */
export const POLICIES = ["serial", "static", "continuous", "chunked", "disaggregated"] as const satisfies readonly Policy[];

export type RequestDone = Extract<LiveEvent, { type: "requestDone" }>;
export type RequestStarted = Extract<LiveEvent, { type: "requestStarted" }>;
export type Tick = Extract<LiveEvent, { type: "tick" }>;
export type SensorReading = Extract<LiveEvent, { type: "sensors" }>;
export type SensorsOpened = Extract<LiveEvent, { type: "sensorsOpened" }>;
export type BackendStatus = Extract<LiveEvent, { type: "backendStatus" }>;

/**
 * A failed call as the UI shows it: a command's error (`CmdError`), its message filled in
 * where the command gives none, or a failure of the call itself (`ipc`).
 */
export interface AppError {
  kind: CmdError["kind"] | "ipc";
  message: string;
}

export type { Check } from "./generated/Check";
export type { Choice } from "./generated/Choice";
export type { Figure } from "./generated/Figure";
export type { Lesson } from "./generated/Lesson";
export type { LessonEvent } from "./generated/LessonEvent";
export type { Metric } from "./generated/Metric";
export type { Report } from "./generated/Report";
export type { Trend } from "./generated/Trend";
export type { MachineSpeed } from "./generated/MachineSpeed";
export type { DeviceSpeed } from "./generated/DeviceSpeed";
export type { MemoryFit } from "./generated/MemoryFit";
export type { SettingsFit } from "./generated/SettingsFit";
export type { FitPlan } from "./generated/FitPlan";
export type { Footprint } from "./generated/Footprint";
