// SPDX-License-Identifier: Apache-2.0
//
// What `kubectl kustomize DIR` prints for deploy/kubernetes, for machines
// without kubectl (Debian 12 packages neither it nor kustomize): the
// resources, and a ConfigMap for each configMapGenerator from its files.
// Only the fields that kustomization uses are known here; any other one
// is refused rather than ignored, so that this never prints something
// kustomize would not.
// Usage: node render-kustomization.mjs DIR > manifests.yaml
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";

const dir = process.argv[2];
const read = (name) => readFileSync(join(dir, name), "utf8");
const k = parse(read("kustomization.yaml"));
const known = ["apiVersion", "kind", "resources", "configMapGenerator",
  "generatorOptions"];
const unknown = Object.keys(k).filter((key) => !known.includes(key));
if (unknown.length > 0 || k.generatorOptions?.disableNameSuffixHash !== true) {
  console.error(`render-kustomization: ${dir}/kustomization.yaml uses ` +
    `${unknown.join(", ") || "name suffix hashes"}: use kubectl kustomize`);
  process.exit(1);
}
const objects = [];
for (const gen of k.configMapGenerator ?? []) {
  const keys = Object.keys(gen).filter((key) => key !== "name" && key !== "files");
  if (keys.length > 0 || gen.files.some((file) => file.includes("="))) {
    console.error(`render-kustomization: configMapGenerator ${gen.name} ` +
      "uses more than files: use kubectl kustomize");
    process.exit(1);
  }
  const data = {};
  for (const file of gen.files) data[basename(file)] = read(file);
  objects.push({ apiVersion: "v1", kind: "ConfigMap",
    metadata: { name: gen.name }, data });
}
for (const file of k.resources ?? []) {
  for (const doc of parseAllDocuments(read(file))) objects.push(doc.toJS());
}
console.log(objects.map((o) => stringify(o)).join("---\n"));
