/// <reference types="vitest" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The built app is served by Django under /static/app/ (WhiteNoise); the dev server serves it
// at / and forwards the API, the sockets and the sign-in pages to Django on :8000.
const django = process.env.TANDEM_DEV_BACKEND ?? "http://127.0.0.1:8000";

export default defineConfig(({ command }) => ({
  base: command === "build" ? "/static/app/" : "/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // noVNC uses top-level await.
    target: "es2022",
    sourcemap: true,
  },
  optimizeDeps: {
    esbuildOptions: { target: "es2022" },
  },
  server: {
    proxy: {
      // "/" is Django's: it sends a signed-in person to /app/ (where sign-in lands).
      "^/$": django,
      "/api": django,
      "/accounts": django,
      "/admin": django,
      "/static": django,
      "/ws": { target: django.replace(/^http/, "ws"), ws: true },
    },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
}));
