import { describe, expect, it } from "vitest";
import {
  withBaseModel,
  defaultForm,
  jobRequest,
  lossAxisMax,
  lossChart,
  lossText,
  mayManage,
  stageOrder,
  unusableBecause,
  evaluationProject,
  costLines,
  type CostEstimate,
  type DatasetExport,
  type ModelVersion,
} from "./finetune";

const DEFAULTS = {
  lora: { r: 16, alpha: 32, dropout: 0.05, target_modules: ["q_proj", "v_proj"] },
  hyperparameters: {
    learning_rate: 0.0001,
    epochs: 1,
    max_steps: -1,
    batch_size: 1,
    gradient_accumulation_steps: 8,
    beta: 0.1,
    seed: 42,
    bf16: null,
    gradient_checkpointing: false,
    uncheckpointed_layers: 0,
    vision_cache_gib: 8,
    keep_attention: true,
    dpo_shared_prompt: true,
  },
};

function exportOf(id: number, kind: "sft" | "dpo" | "ct", extra: Partial<DatasetExport> = {}): DatasetExport {
  return {
    id,
    project: 1,
    kind,
    format: "trl",
    status: "succeeded",
    filters: { exclude_held_out: true },
    counts: {},
    created_at: "2026-11-20T10:00:00Z",
    ...extra,
  };
}

describe("stageOrder", () => {
  it("puts SFT stages before DPO stages, keeping the chosen order within a kind", () => {
    const order = stageOrder([exportOf(7, "dpo"), exportOf(3, "sft"), exportOf(9, "dpo"), exportOf(5, "sft")]);
    expect(order.map((e) => e.id)).toEqual([3, 5, 7, 9]);
  });
});

describe("unusableBecause", () => {
  it("accepts a succeeded TRL SFT or DPO export without the evaluation split", () => {
    expect(unusableBecause(exportOf(1, "sft"))).toBeNull();
    expect(unusableBecause(exportOf(2, "dpo"))).toBeNull();
  });

  it("names why the others cannot be trained on", () => {
    expect(unusableBecause(exportOf(1, "ct"))).toMatch(/SFT and DPO/);
    expect(unusableBecause(exportOf(1, "sft", { format: "llama_factory" }))).toMatch(/TRL/);
    expect(unusableBecause(exportOf(1, "sft", { status: "running" }))).toBe("it is running");
    expect(unusableBecause(exportOf(1, "sft", { filters: {} }))).toMatch(/evaluation split/);
  });
});

describe("jobRequest", () => {
  const filled = () => ({
    ...defaultForm(DEFAULTS, "tiny-qwen"),
    exports: [exportOf(13, "dpo"), exportOf(12, "sft")],
    versionName: " ui-tars-ft-2 ",
  });

  it("maps the defaults to the request, stages in recipe order", () => {
    const result = jobRequest(filled());
    expect(result).toEqual({
      body: {
        exports: [12, 13],
        base_model: "tiny-qwen",
        version_name: "ui-tars-ft-2",
        lora: { r: 16, alpha: 32, dropout: 0.05, target_modules: ["q_proj", "v_proj"] },
        hyperparameters: {
          learning_rate: 0.0001,
          epochs: 1,
          max_steps: -1,
          batch_size: 1,
          gradient_accumulation_steps: 8,
          beta: 0.1,
          seed: 42,
          bf16: null,
          gradient_checkpointing: false,
          uncheckpointed_layers: 0,
          vision_cache_gib: 8,
          keep_attention: true,
          dpo_shared_prompt: true,
        },
      },
    });
  });

  it("sends a parent version instead of a base model, and the optional fields when given", () => {
    const form = filled();
    form.parentVersion = "ui-tars-ft-1";
    form.baseUrl = "http://gpu:8001/v1";
    form.name = "second round";
    form.hp.maxSteps = "20";
    form.hp.bf16 = "off";
    form.hp.uncheckpointedLayers = "4";
    form.hp.visionCacheGib = "2.5";
    form.hp.dpoSharedPrompt = false;
    form.hp.keepAttention = false;
    form.lora.targetModules = "q_proj,  k_proj\nv_proj";
    const result = jobRequest(form);
    if (!("body" in result)) throw new Error(JSON.stringify(result));
    expect(result.body.base_model).toBe("");
    expect(result.body.parent_version).toBe("ui-tars-ft-1");
    expect(result.body.base_url).toBe("http://gpu:8001/v1");
    expect(result.body.name).toBe("second round");
    expect(result.body.hyperparameters.max_steps).toBe(20);
    expect(result.body.hyperparameters.bf16).toBe(false);
    expect(result.body.hyperparameters.uncheckpointed_layers).toBe(4);
    expect(result.body.hyperparameters.vision_cache_gib).toBe(2.5);
    expect(result.body.hyperparameters.dpo_shared_prompt).toBe(false);
    expect(result.body.hyperparameters.keep_attention).toBe(false);
    expect(result.body.lora.target_modules).toEqual(["q_proj", "k_proj", "v_proj"]);
  });

  it("lists every mistake by field instead of a request", () => {
    const form = filled();
    form.exports = [];
    form.baseModel = "";
    form.versionName = "bad name!";
    form.lora.r = "4.5";
    form.hp.learningRate = "fast";
    form.lora.targetModules = " , ";
    form.hp.visionCacheGib = "lots";
    expect(jobRequest(form)).toEqual({
      problems: {
        exports: "choose at least one dataset export",
        baseModel: "choose a base model or a version to continue",
        versionName: "letters, digits, dots, dashes and underscores",
        targetModules: "at least one module",
        r: "a whole number",
        learningRate: "a number",
        visionCacheGib: "a number",
      },
    });
  });
});

describe("loss curve", () => {
  it("rounds the axis up to 1, 2 or 5 times a power of ten", () => {
    expect(lossAxisMax([0.69, 0.41])).toBe(1);
    expect(lossAxisMax([1.3])).toBe(2);
    expect(lossAxisMax([3.2, 0.1])).toBe(5);
    expect(lossAxisMax([12])).toBe(20);
    expect(lossAxisMax([0.031])).toBe(0.05);
    expect(lossAxisMax([2])).toBe(2);
    expect(lossAxisMax([])).toBe(1);
    expect(lossAxisMax([Number.NaN, 0])).toBe(1);
  });

  it("writes ticks and losses with three significant digits", () => {
    expect([0, 2.5, 5, 7.5, 10].map(lossText)).toEqual(["0", "2.5", "5", "7.5", "10"]);
    expect([0.0125, 5.608213, 0.69314].map(lossText)).toEqual(["0.0125", "5.61", "0.693"]);
  });

  it("gives one series per stage over the steps in training order", () => {
    const chart = lossChart([
      { stage: 1, kind: "sft", step: 1, loss: 5.6 },
      { stage: 1, kind: "sft", step: 2, loss: 5.1 },
      { stage: 2, kind: "dpo", step: 1, loss: 0.69 },
    ]);
    expect(chart.labels).toEqual(["SFT step 1", "SFT step 2", "DPO step 1"]);
    expect(chart.series).toEqual([
      { name: "Stage 1 (SFT)", values: [5.6, 5.1, null] },
      { name: "Stage 2 (DPO)", values: [null, null, 0.69] },
    ]);
    expect(chart.max).toBe(10);
  });
});

describe("mayManage", () => {
  it("lets an engineer act on jobs of their projects, an admin on all", () => {
    expect(mayManage(new Set([1, 2]), [2, 5])).toBe(true);
    expect(mayManage(new Set([1]), [5])).toBe(false);
    expect(mayManage("all", [5])).toBe(true);
  });
});

describe("withBaseModel", () => {
  const bases = [
    { name: "demo-tiny-qwen", endpoint: "http://127.0.0.1:8100/v1" },
    { name: "ui-tars-1.5-7b", endpoint: "" },
  ];
  const form = defaultForm({ lora: {}, hyperparameters: {} }, "demo-tiny-qwen", "http://127.0.0.1:8100/v1");

  it("takes the endpoint serving the chosen base", () => {
    expect(withBaseModel(form, "ui-tars-1.5-7b", bases).baseUrl).toBe("");
    expect(withBaseModel(withBaseModel(form, "ui-tars-1.5-7b", bases), "demo-tiny-qwen", bases).baseUrl).toBe(
      "http://127.0.0.1:8100/v1",
    );
  });

  it("keeps an endpoint the user typed", () => {
    const typed = { ...form, baseUrl: "http://gpu:8001/v1" };
    expect(withBaseModel(typed, "ui-tars-1.5-7b", bases)).toMatchObject({ baseModel: "ui-tars-1.5-7b", baseUrl: "http://gpu:8001/v1" });
  });
});

describe("evaluationProject", () => {
  const version = { training_projects: [4, 9] } as unknown as ModelVersion;
  it("starts on the project the version was trained on, first one the user may read", () => {
    expect(evaluationProject(version, [1, 9, 4])).toBe("4");
    expect(evaluationProject(version, [1, 9])).toBe("9");
  });
  it("leaves the choice to the picker for a base version or a project the user cannot read", () => {
    expect(evaluationProject(version, [1, 2])).toBe("");
    expect(evaluationProject({ training_projects: [] } as unknown as ModelVersion, [1])).toBe("");
  });
});

describe("the cost estimate", () => {
  const estimate: CostEstimate = {
    stages: [{ kind: "sft", rows: 120, tokens_per_row: { min: 3000, median: 14230, max: 14400 } }],
    card: "NVIDIA H200",
    source: "make bench-gpu",
    gpu_hours: 1.2,
    gpu_memory_gib: 26.1,
    architecture: "qwen2.5-vl-7b",
    scaled_from: null,
    max_length: 14300,
    text_tokens: "counted",
    too_long: [{ export: 12, row: "export 12 row 7 (episode 3, step 4)", tokens: 14400 }],
  };

  it("shows rows, tokens per row, the GPU cost on the named card and the rows too long", () => {
    expect(costLines(estimate)).toEqual([
      "SFT: 120 rows, tokens per row 3000 / 14230 / 14400 (min / median / max)",
      "qwen2.5-vl-7b on NVIDIA H200: about 26.1 GiB, 1.2 GPU hours",
      "Too long for max_length 14300: export 12 row 7 (episode 3, step 4), 14400 tokens",
    ]);
  });

  it("says why there is no GPU cost, and when text tokens are estimated", () => {
    const lines = costLines({ ...estimate, gpu_hours: undefined, gpu_memory_gib: undefined, reason: "no measured figures", text_tokens: "estimated", too_long: [] });
    expect(lines.slice(1)).toEqual(["GPU cost: no measured figures", "Text tokens estimated: the base's tokenizer is not readable here."]);
  });

  it("sends max_length only when one is typed, and refuses one that is not a whole number", () => {
    const form = defaultForm(DEFAULTS, "tiny-qwen");
    form.exports = [exportOf(12, "sft")];
    form.versionName = "v1";
    const sent = jobRequest(form);
    expect("body" in sent && sent.body.hyperparameters.max_length).toBe(undefined);
    form.hp.maxLength = "16384";
    const typed = jobRequest(form);
    expect("body" in typed && typed.body.hyperparameters.max_length).toBe(16384);
    form.hp.maxLength = "1.5";
    expect(jobRequest(form)).toEqual({ problems: { maxLength: "a whole number" } });
  });
});
