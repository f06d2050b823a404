// SPDX-License-Identifier: Apache-2.0
//
// Validates the Kubernetes objects of a YAML stream (stdin) against the
// JSON schemas that kubernetes-models generates from Kubernetes' OpenAPI
// document: types, formats and required fields. Those schemas allow
// unknown fields, so a misspelt key (readinesProbe) would pass and be
// dropped by the API server without a word: the objects are also written
// to TSFILE as typed TypeScript literals, for deploy/check to run tsc on,
// whose excess-property check refuses any field the types do not have.
// Usage: node check-manifests.mjs TSFILE < manifests.yaml
import { writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const tsFile = process.argv[2];
let input = "";
for await (const chunk of process.stdin) input += chunk;

let failed = false;
const imports = [];
const literals = [];
for (const doc of parseAllDocuments(input)) {
  if (doc.errors.length > 0) {
    console.error(`YAML: ${doc.errors[0].message}`);
    failed = true;
    continue;
  }
  const obj = doc.toJS();
  if (obj === null) continue;
  const what = `${obj.kind} ${obj.metadata?.name ?? "(no name)"}`;
  // apps/v1 is kubernetes-models/apps/v1, the core group's v1 is /v1.
  const module = `kubernetes-models/${obj.apiVersion}`;
  let model;
  try {
    model = (await import(module))[obj.kind];
  } catch {
    // An apiVersion that does not exist has no module.
  }
  if (model === undefined) {
    console.error(`${what}: no schema for ${obj.apiVersion} ${obj.kind}`);
    failed = true;
    continue;
  }
  try {
    new model(obj).validate();
    console.log(`${what}: valid (${obj.apiVersion})`);
  } catch (e) {
    console.error(`${what}: ${e.message}`);
    failed = true;
  }
  const n = literals.length;
  imports.push(`import type { I${obj.kind} as T${n} } from "${module}/${obj.kind}";`);
  // One key a line, so that tsc's line number points at the field.
  literals.push(`// ${what}\nexport const o${n}: T${n} = ${JSON.stringify(obj, null, 2)};`);
}
writeFileSync(tsFile, [...imports, ...literals, ""].join("\n"));
process.exit(failed ? 1 : 0);
