/**
 * Every command the app offers, one function each: components never call `invoke`
 * directly. Streaming commands take a callback that receives the channel's messages.
 */
import { call, channel } from "./core";
import type {
  AdviseEvent,
  BackendAvailability,
  CatalogModel,
  CheckRow,
  FetchEvent,
  FidelityEvent,
  GalleryShown,
  HardwareReport,
  Lesson,
  LessonEvent,
  Length,
  MachineSpeed,
  MemoryFit,
  LiveEvent,
  LiveSettings,
  ModelInfo,
  OpenedRun,
  PointCeiling,
  PresetRecord,
  ServerSpec,
  SettingsFit,
  SweepEvent,
  SweepOptions,
  SweepPlan,
  Sustained,
  TuneEvent,
  TuneStatus,
} from "./types";

export const hardware = () => call<HardwareReport>("hardware");
export const backends = () => call<BackendAvailability[]>("backends");
export const checkBackends = (onRow: (row: CheckRow) => void) => call<CheckRow[]>("check_backends", { onRow: channel(onRow) });

export const serverAdd = (spec: ServerSpec) => call<BackendAvailability>("server_add", { spec });
export const serverRemove = (name: string) => call<void>("server_remove", { name });

export const models = () => call<CatalogModel[]>("models");
export const currentModel = () => call<ModelInfo | null>("current_model");
export const openModel = (spec: string, onProgress: (e: FetchEvent) => void) =>
  call<ModelInfo>("open_model", { spec, onProgress: channel(onProgress) });
export const pickModelFile = () => call<string | null>("pick_model_file");

export const liveStart = (settings: LiveSettings, onBatch: (events: LiveEvent[]) => void) =>
  call<void>("live_start", { settings, onEvent: channel(onBatch) });
export const liveUpdate = (settings: LiveSettings) => call<void>("live_update", { settings });
export const liveCeiling = (backend: string) => call<PointCeiling | null>("live_ceiling", { backend });
export const liveRetry = () => call<void>("live_retry");
export const livePreviewNext = () => call<void>("live_preview_next");
export const liveStop = () => call<void>("live_stop");
export const liveSave = () => call<string>("live_save");

export const sweepStart = (plan: SweepPlan, options: SweepOptions, onEvent: (e: SweepEvent) => void) =>
  call<string>("sweep_start", { plan, options, onEvent: channel(onEvent) });
export const sweepCancel = () => call<void>("sweep_cancel");
export const parseLengths = (text: string) => call<Length[]>("parse_lengths", { text });

export const tuneStatus = () => call<TuneStatus>("tune_status");
export const tuneStart = (budgetS: number, onEvent: (e: TuneEvent) => void) => call<void>("tune_start", { budgetS, onEvent: channel(onEvent) });
export const tuneCancel = () => call<void>("tune_cancel");

export const fidelityStart = (backends: string[], chunks: number, onEvent: (e: FidelityEvent) => void) =>
  call<string>("fidelity_start", { backends, chunks, onEvent: channel(onEvent) });
export const fidelityCancel = () => call<void>("fidelity_cancel");

export const advisePresets = () => call<PresetRecord[]>("advise_presets");
export const adviseStart = (preset: string, backends: string[], budgetS: number, onEvent: (e: AdviseEvent) => void) =>
  call<string>("advise_start", { preset, backends, budgetS, onEvent: channel(onEvent) });
export const adviseCancel = () => call<void>("advise_cancel");

export const machineSpeed = (measure: boolean) => call<MachineSpeed | null>("machine_speed", { measure });
export const memoryFit = () => call<MemoryFit | null>("memory_fit");
export const settingsFit = (settings: LiveSettings) => call<SettingsFit[] | null>("settings_fit", { settings });

export const lessons = () => call<Lesson[]>("lessons");
export const lessonStart = (name: string, backend: string, onEvent: (e: LessonEvent) => void) =>
  call<string>("lesson_start", { name, backend, onEvent: channel(onEvent) });
export const lessonCancel = () => call<void>("lesson_cancel");
export const lessonHandout = (runs: string[]) => call<string>("lesson_handout", { runs });

export const runOpen = (path: string) => call<OpenedRun>("run_open", { path });
export const pickRunFile = () => call<string | null>("pick_run_file");

export const liveSustained = () => call<Sustained | null>("live_sustained");

export const galleryAdd = (paths: string[]) => call<GalleryShown>("gallery_add", { paths });
export const pickBenchFiles = () => call<string[]>("pick_bench_files");

export const exportCsv = (source: "live" | "sweep") => call<string | null>("export_csv", { source });
export const exportPng = (fileName: string, png: Uint8Array) =>
  call<string | null>("export_png", png, { headers: { "x-file-name": fileName } });
