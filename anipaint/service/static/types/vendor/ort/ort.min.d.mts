// The types of vendor/ort/ort.min.mjs, the ONNX Runtime Web bundle scripts/setup.sh copies from the onnxruntime-web
// package (pinned in package-lock.json): the package's own declarations. tsconfig.json's rootDirs lays this folder
// over static/, so that device-worker.js's `import "./vendor/ort/ort.min.mjs"` is checked against them.
export * from "onnxruntime-web";
