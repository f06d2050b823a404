// SPDX-License-Identifier: Apache-2.0
// aedes (npm, 3.1.1 only) as a broker of the MQTT tests (corMqttPeer.c):
// node corMqttAedes.mjs PORT AEDES_JS listens on 127.0.0.1:PORT until it
// is killed. AEDES_JS is build/npm/node_modules/aedes/aedes.js, which
// ./configure --install-deps installs there (the tree stays clean).
import net from 'node:net';
import { pathToFileURL } from 'node:url';

const { Aedes } = await import(pathToFileURL(process.argv[3]).href);
const broker = await Aedes.createBroker();

net.createServer(broker.handle).listen(Number(process.argv[2]), '127.0.0.1');
