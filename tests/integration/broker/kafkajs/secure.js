// kafkajs over a secured Tidelake listener, driven by
// tests/integration/security/test_kafkajs_security.py: produce `count`
// records to `topic`, then read them back in a fresh group, and print one
// JSON line: {"produced": n, "consumed": [values...]} or {"error": {...}}.
//
//   node secure.js '{"broker", "topic", "count", "ca", "cert"?, "key"?, "sasl"?, "timeoutMs"}'
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const ssl = { ca: [fs.readFileSync(args.ca, 'utf-8')] }
if (args.cert) {
  ssl.cert = fs.readFileSync(args.cert, 'utf-8')
  ssl.key = fs.readFileSync(args.key, 'utf-8')
}
const kafka = new Kafka({
  clientId: 'tidelake-kafkajs-secure',
  brokers: [args.broker],
  ssl,
  sasl: args.sasl || undefined,
  logLevel: logLevel.NOTHING,
  retry: { retries: 2, initialRetryTime: 100 },
})
const print = obj => process.stdout.write(JSON.stringify(obj) + '\n')
setTimeout(() => { print({ error: { name: 'Timeout', message: 'gave up' } }); process.exit(2) }, args.timeoutMs)

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < args.count; i++) messages.push({ partition: 0, value: `v-${i}` })
  await producer.send({ topic: args.topic, messages })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: `kjs-secure-${Date.now()}` })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  const consumed = []
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString())
        if (consumed.length >= args.count) resolve()
      },
    })
  })
  await consumer.disconnect()
  print({ produced: args.count, consumed })
}

main().then(() => process.exit(0), (e) => {
  print({ error: { name: e.name, type: e.type || null, message: e.message } })
  process.exit(0)
})
