// Validates Kubernetes objects against the upstream OpenAPI schemas (npm kubernetes-models), the
// Prometheus Operator's CRD schemas (@kubernetes-models/prometheus-operator) and cert-manager's
// (@kubernetes-models/cert-manager), offline.
//
//   node validate.mjs < objects.json      # a JSON array of objects
//
// Prints a JSON array with one entry per object, in input order: {kind, name, errors}, where
// errors lists every schema violation, every field that the schema does not define (the API
// server would drop it, or refuse it with strict field validation) and a missing schema for the
// object's apiVersion/kind. Exits 0 when it could check everything it was given (errors or not),
// 2 on unreadable input.
//
// Unknown fields: the schemas are compiled validators that read each field they define by name
// and enumerate the keys of maps only (labels, resources, ...). Each object is wrapped in a Proxy
// that records the names read and the maps enumerated; a key that the validator never read, in an
// object it never enumerated, is a field the schema does not have.

const MODEL_PACKAGES = [
  { test: (group) => group.endsWith(".coreos.com"), pkg: "@kubernetes-models/prometheus-operator" },
  { test: (group) => group === "cert-manager.io", pkg: "@kubernetes-models/cert-manager" },
  { test: () => true, pkg: "kubernetes-models" },
];

async function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const { pkg } = MODEL_PACKAGES.find((p) => p.test(group));
  try {
    const module = await import(`${pkg}/${apiVersion}/${kind}`);
    const model = module[kind];
    if (model && model.apiVersion === apiVersion && model.kind === kind) return model;
  } catch (e) {
    if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED" && e.code !== "ERR_MODULE_NOT_FOUND") throw e;
  }
  return null;
}

function track(value, path, read, enumerated) {
  if (value === null || typeof value !== "object") return value;
  const copy = Array.isArray(value)
    ? value.map((v, i) => track(v, `${path}/${i}`, read, enumerated))
    : Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, track(v, `${path}/${escape(k)}`, read, enumerated)]),
      );
  return new Proxy(copy, {
    get(target, key, receiver) {
      if (typeof key === "string") read.add(`${path}/${escape(key)}`);
      return Reflect.get(target, key, receiver);
    },
    has(target, key) {
      if (typeof key === "string") read.add(`${path}/${escape(key)}`);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      enumerated.add(path);
      return Reflect.ownKeys(target);
    },
  });
}

// JSON Pointer escaping, so that a path names one field.
function escape(key) {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

function unknownFields(value, path, read, enumerated, out) {
  if (value === null || typeof value !== "object") return out;
  for (const [key, child] of Object.entries(value)) {
    const childPath = `${path}/${Array.isArray(value) ? key : escape(key)}`;
    if (!Array.isArray(value) && !enumerated.has(path) && !read.has(childPath)) {
      out.push(`unknown field ${childPath}`);
      continue; // its insides are unknown too
    }
    unknownFields(child, childPath, read, enumerated, out);
  }
  return out;
}

async function check(object) {
  const kind = object && object.kind;
  const name = object && object.metadata && object.metadata.name;
  const errors = [];
  const model = await modelFor(object && object.apiVersion, kind);
  if (model === null) {
    errors.push(`no schema for apiVersion ${JSON.stringify(object && object.apiVersion)} kind ${JSON.stringify(kind)}`);
    return { kind, name, errors };
  }
  const read = new Set();
  const enumerated = new Set();
  try {
    model.prototype.validate.call(track(object, "", read, enumerated));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    for (const err of e.errors) errors.push(`schema: ${err.instancePath || "/"} ${err.message}`);
  }
  errors.push(...unknownFields(object, "", read, enumerated, []));
  return { kind, name, errors };
}

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  let objects;
  try {
    objects = JSON.parse(input);
  } catch (e) {
    process.stderr.write(`validate.mjs: stdin is not JSON: ${e.message}\n`);
    process.exit(2);
  }
  if (!Array.isArray(objects)) {
    process.stderr.write("validate.mjs: stdin must be a JSON array of objects\n");
    process.exit(2);
  }
  const results = [];
  for (const object of objects) results.push(await check(object));
  process.stdout.write(JSON.stringify(results, null, 1) + "\n");
}

await main();
