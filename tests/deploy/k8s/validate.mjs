// Validates Kubernetes objects against the upstream schemas: every object of every YAML file
// (or `kubectl kustomize` output on stdin, "-") is checked by the kubernetes-models class for
// its apiVersion and kind (the OpenAPI schemas of Kubernetes, KEDA and the Prometheus
// Operator: types, enums, required fields), and then strictly: a field the schema does not
// declare (a typo such as `replica:`) is an error too, as `kubectl apply --validate=strict`
// would make it. Exit 0 when every object passes; 1 with one line per problem otherwise.
// Usage: node validate.mjs FILE.yaml... | -
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "node_modules");

// apiVersion -> the module holding its classes.
const groups = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "batch/v1": "kubernetes-models/batch/v1",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "policy/v1": "kubernetes-models/policy/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
  "keda.sh/v1alpha1": "@kubernetes-models/keda/keda.sh/v1alpha1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

// --- The declared fields of each type, read from the packages' TypeScript declarations ---

const declarations = new Map(); // file -> { fields, index, imports } of its first interface

// "pkg/sub/path" or "./X.js" (from `from`) -> the .d.ts file.
function declarationFile(spec, from) {
  const base = spec.startsWith(".") ? join(dirname(from), spec) : join(modules, spec);
  return base.replace(/\.js$/, "") + ".d.ts";
}

// A type expression -> { kind: "leaf" | "ref" | "array" | "object" | "union", ... }.
function parseType(text, pos, imports) {
  const alternatives = [];
  for (;;) {
    const [t, next] = parseSingle(text, pos, imports);
    alternatives.push(t);
    pos = skipSpace(text, next);
    if (text[pos] !== "|") break;
    pos += 1;
  }
  return [alternatives.length === 1 ? alternatives[0] : { kind: "union", of: alternatives }, pos];
}

function skipSpace(text, pos) {
  while (pos < text.length && /\s/.test(text[pos])) pos += 1;
  return pos;
}

function parseSingle(text, pos, imports) {
  pos = skipSpace(text, pos);
  if (text[pos] === "{") return parseObject(text, pos, imports);
  if (text.startsWith("Array<", pos)) {
    const [item, next] = parseType(text, pos + 6, imports);
    return [{ kind: "array", item }, skipSpace(text, next) + 1]; // past ">"
  }
  if (text[pos] === '"') {
    const end = text.indexOf('"', pos + 1);
    return [{ kind: "leaf" }, end + 1];
  }
  const m = /^[A-Za-z_$][\w$.]*/.exec(text.slice(pos));
  if (!m) throw new Error(`cannot read a type at: ${text.slice(pos, pos + 40)}`);
  const name = m[0];
  pos += name.length;
  if (text[pos] === "[" && text[pos + 1] === "]") return [{ kind: "array", item: { kind: "leaf" } }, pos + 2];
  const file = imports.get(name);
  return [file ? { kind: "ref", file } : { kind: "leaf" }, pos];
}

function parseObject(text, pos, imports) {
  const fields = new Map();
  let index = null;
  pos += 1; // "{"
  for (;;) {
    pos = skipSpace(text, pos);
    if (text[pos] === "}") return [{ kind: "object", fields, index }, pos + 1];
    if (text[pos] === "[") {
      const close = text.indexOf("]", pos);
      pos = skipSpace(text, close + 1) + 1; // past ":"
      const [t, next] = parseType(text, pos, imports);
      index = t;
      pos = next;
    } else {
      const m = /^"([^"]*)"\??\s*:|^([A-Za-z_$][\w$]*)\??\s*:/.exec(text.slice(pos));
      if (!m) throw new Error(`cannot read a field at: ${text.slice(pos, pos + 40)}`);
      pos += m[0].length;
      const [t, next] = parseType(text, pos, imports);
      fields.set(m[1] ?? m[2], t);
      pos = next;
    }
    pos = skipSpace(text, pos);
    if (text[pos] === ";" || text[pos] === ",") pos += 1;
  }
}

function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"([^"]+)"/g)) {
    for (const name of m[1].split(",").map((s) => s.trim()).filter(Boolean)) {
      imports.set(name.split(/\s+as\s+/).pop(), declarationFile(m[2], file));
    }
  }
  const m = /export interface \w+(?:\s+extends\s+([\w.,\s]+?))?\s*\{/.exec(text);
  const decl = m ? parseObject(text, m.index + m[0].length - 1, imports)[0] : { kind: "leaf" };
  declarations.set(file, decl);
  // Fields of the interfaces it extends (TypeMeta's apiVersion and kind are declared anyway).
  for (const base of (m?.[1] ?? "").split(",").map((s) => s.trim()).filter(Boolean)) {
    const baseFile = imports.get(base);
    if (!baseFile || !existsSync(baseFile)) continue;
    const inherited = declaration(baseFile);
    if (inherited.kind !== "object") continue;
    for (const [k, t] of inherited.fields) if (!decl.fields.has(k)) decl.fields.set(k, t);
    decl.index ??= inherited.index;
  }
  return decl;
}

// Unknown fields of `value` under type `t`, as paths.
function unknownFields(value, t, path) {
  if (t.kind === "ref") return unknownFields(value, declaration(t.file), path);
  if (t.kind === "array") {
    if (!Array.isArray(value)) return [];
    return value.flatMap((v, i) => unknownFields(v, t.item, `${path}[${i}]`));
  }
  if (t.kind === "union") {
    const tries = t.of.map((alt) => unknownFields(value, alt, path));
    return tries.some((e) => e.length === 0) ? [] : tries[0];
  }
  if (t.kind !== "object" || value === null || typeof value !== "object" || Array.isArray(value)) return [];
  const out = [];
  for (const [k, v] of Object.entries(value)) {
    const ft = t.fields.get(k) ?? t.index;
    if (!ft) out.push(`${path}.${k}`);
    else out.push(...unknownFields(v, ft, `${path}.${k}`));
  }
  return out;
}

// --- The objects ---

async function validate(obj, where) {
  if (obj === null || typeof obj !== "object") return [`${where}: not an object`];
  if (obj.kind === "Kustomization") return [];
  const { apiVersion, kind } = obj;
  const name = `${where}: ${kind ?? "?"} ${obj.metadata?.name ?? "?"}`;
  const module = groups[apiVersion];
  if (!module) return [`${name}: apiVersion ${apiVersion} is not one this check knows`];
  const classes = await import(module);
  const Model = classes[kind];
  if (!Model) return [`${name}: ${apiVersion} has no kind ${kind}`];
  const problems = [];
  if (apiVersion === "v1" && kind === "Secret" && obj.data) {
    // The API server's base64 decoder skips line breaks, and kustomize wraps long values.
    for (const k of Object.keys(obj.data)) obj.data[k] = String(obj.data[k]).replace(/\s+/g, "");
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    problems.push(`${name}: ${e.message}`);
  }
  const file = declarationFile(`${module}/${kind}.js`, modules);
  for (const p of unknownFields(obj, declaration(file), "")) problems.push(`${name}: unknown field ${p.slice(1)}`);
  return problems;
}

const inputs = process.argv.slice(2);
if (inputs.length === 0) {
  console.error("usage: node validate.mjs FILE.yaml... | -");
  process.exit(2);
}
let objects = 0;
const problems = [];
for (const input of inputs) {
  const text = readFileSync(input === "-" ? 0 : input, "utf8");
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) {
      problems.push(`${input}: YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    objects += 1;
    problems.push(...(await validate(obj, input === "-" ? "stdin" : input)));
  }
}
for (const p of problems) console.log(p);
console.log(`${objects} object(s), ${problems.length} problem(s)`);
process.exit(problems.length === 0 && objects > 0 ? 0 : 1);
