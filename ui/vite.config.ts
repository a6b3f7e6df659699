import { defineConfig } from "vitest/config";

// The app loads the built files from ui/dist through Tauri's custom protocol: no remote
// content, one bundle, relative paths.
export default defineConfig({
  base: "./",
  clearScreen: false,
  server: { port: 5173, strictPort: true },
  build: {
    target: "es2022",
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.ts"],
  },
});
