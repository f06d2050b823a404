#!/usr/bin/node
// SPDX-License-Identifier: Apache-2.0
/*
 * npm's ws (Debian's node-ws) against cor's websocket module: COUNT
 * connections in turn each send one binary message of SIZE bytes, past the
 * server's max_message, and must see the server's close status 1009 (a
 * close that resets the connection while the client still sends shows as
 * 1006).
 *
 *     NODE_PATH=/usr/share/nodejs wsTooBig.js URL COUNT SIZE [CA_FILE]
 *
 * Prints each connection's close status and "ALL OK" when every one was
 * 1009; exits 1 otherwise.
 */
'use strict';

const fs = require('fs');
const WebSocket = require('ws');

const [url, count, size, ca] = process.argv.slice(2);

function one() {
    return new Promise((resolve) => {
        const ws = new WebSocket(url, {
            perMessageDeflate: false,
            ca: ca ? fs.readFileSync(ca) : undefined,
        });

        ws.on('open', () => ws.send(Buffer.alloc(Number(size), 0x78)));
        ws.on('error', (e) => console.log('error ' + e.message));
        ws.on('close', (code) => resolve(code));
    });
}

(async () => {
    let ok = 0;

    for (let i = 0; i < Number(count); i++) {
        const code = await one();

        console.log('close ' + code);
        ok += code === 1009 ? 1 : 0;
    }
    console.log(ok === Number(count) ? 'ALL OK' : ok + ' of ' + count);
    process.exit(ok === Number(count) ? 0 : 1);
})();
