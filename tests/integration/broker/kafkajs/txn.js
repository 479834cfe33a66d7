// kafkajs transactions against a Tidelake broker, driven by
// tests/integration/broker/test_txn_kafkajs.py, which asserts on what this
// prints: one JSON object per line on stdout.
//
//   node txn.js <command> '<json arguments>'
//
// produce  {broker, topic, tid, transactions: [{end: "commit"|"abort", records: [{partition, value}]}]}
// consume  {broker, topic, group, readUncommitted, expect, settleMs}
// ctp      {broker, src, dst, group, tid, count}   consume-transform-produce, one record per transaction
// fence    {broker, topic, tid, zombieStep: "commit"|"send"}
// (each also takes timeoutMs: the script exits 2 after it, saying so)
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [command, rawArgs] = process.argv.slice(2)
const args = JSON.parse(rawArgs)
const kafka = new Kafka({
  clientId: 'tidelake-kafkajs-test',
  brokers: [args.broker],
  logLevel: logLevel.NOTHING,
  retry: { retries: 5, initialRetryTime: 100 },
})
const print = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const describe = e => ({
  name: e.name,
  type: e.type || null,
  message: e.message,
  cause: e.cause ? describe(e.cause) : null,
})
const transactional = tid =>
  kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 })

async function produce () {
  const producer = transactional(args.tid)
  await producer.connect()
  try {
    for (const t of args.transactions) {
      const txn = await producer.transaction()
      await txn.send({
        topic: args.topic,
        messages: t.records.map(r => ({ partition: r.partition, value: r.value })),
      })
      await (t.end === 'commit' ? txn.commit() : txn.abort())
      print({ ended: t.end })
    }
  } finally {
    await producer.disconnect()
  }
}

// Reads from the start of the topic in a fresh group until `expect` records
// came, then for `settleMs` more and at least three more fetches (a record
// too many is seen too, and "nothing" means fetches that returned nothing).
async function consume () {
  const consumer = kafka.consumer({
    groupId: args.group,
    readUncommitted: args.readUncommitted,
    maxWaitTimeInMs: 200,
  })
  let seen = 0
  let fetches = 0
  let settled
  const done = new Promise(resolve => { settled = resolve })
  let reachedAt = null
  const check = () => {
    if (reachedAt === null && seen >= args.expect) reachedAt = { time: Date.now(), fetches }
    if (reachedAt !== null && Date.now() - reachedAt.time >= args.settleMs &&
        fetches - reachedAt.fetches >= 3) settled()
  }
  consumer.on(consumer.events.FETCH, () => { fetches += 1; check() })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      print({ partition, offset: Number(message.offset), value: message.value.toString() })
      seen += 1
      check()
    },
  })
  await done
  await consumer.disconnect()
}

// One transaction per input record: the transformed record and the input's
// next offset (sendOffsets). The first attempt at every third record is
// aborted and the consumer seeks back to the group's committed offset; each
// end prints the group's committed offset as the broker reports it.
async function ctp () {
  const producer = transactional(args.tid)
  const consumer = kafka.consumer({ groupId: args.group, readUncommitted: false, maxWaitTimeInMs: 200 })
  const admin = kafka.admin()
  await Promise.all([producer.connect(), consumer.connect(), admin.connect()])
  const committed = async () => {
    const [topic] = await admin.fetchOffsets({ groupId: args.group, topics: [args.src] })
    return Number(topic.partitions.find(p => p.partition === 0).offset)
  }
  const attempts = new Map()
  let finished
  const done = new Promise(resolve => { finished = resolve })
  await consumer.subscribe({ topic: args.src, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const offset = Number(message.offset)
      const attempt = (attempts.get(offset) || 0) + 1
      attempts.set(offset, attempt)
      const txn = await producer.transaction()
      await txn.send({ topic: args.dst, messages: [{ partition: 0, value: 'x' + message.value.toString() }] })
      await txn.sendOffsets({
        consumerGroupId: args.group,
        topics: [{ topic, partitions: [{ partition, offset: String(offset + 1) }] }],
      })
      const abort = offset % 3 === 1 && attempt === 1
      await (abort ? txn.abort() : txn.commit())
      const now = await committed()
      print({ offset, end: abort ? 'abort' : 'commit', committed: now })
      if (abort) {
        consumer.seek({ topic, partition, offset: String(now < 0 ? 0 : now) })
      } else if (offset + 1 >= args.count) {
        finished()
      }
    },
  })
  await done
  await Promise.all([consumer.disconnect(), producer.disconnect(), admin.disconnect()])
}

// Two producers with one transactional id: the second one's first
// transaction fences the first (whose transaction is open); then the first
// tries its next step.
async function fence () {
  const zombie = transactional(args.tid)
  const successor = transactional(args.tid)
  await Promise.all([zombie.connect(), successor.connect()])
  try {
    const zt = await zombie.transaction()
    await zt.send({ topic: args.topic, messages: [{ partition: 0, value: 'z-0' }] })
    const st = await successor.transaction()
    await st.send({ topic: args.topic, messages: [{ partition: 0, value: 's-1' }] })
    await st.commit()
    print({ successor: 'committed' })
    try {
      if (args.zombieStep === 'send') {
        await zt.send({ topic: args.topic, messages: [{ partition: 0, value: 'z-2' }] })
      }
      await zt.commit()
      print({ zombie: 'committed' })
    } catch (e) {
      print({ zombie: 'failed', error: describe(e) })
    }
  } finally {
    await Promise.all([zombie.disconnect(), successor.disconnect()])
  }
}

const commands = { produce, consume, ctp, fence }
// a command that hangs says so (and what it printed) instead of being killed
setTimeout(() => {
  print({ fatal: { name: 'Timeout', message: `${command} did not finish in ${args.timeoutMs || 45000} ms` } })
  process.exit(2)
}, args.timeoutMs || 45000).unref()
commands[command]().then(
  () => process.exit(0),
  e => {
    print({ fatal: describe(e) })
    process.exit(1)
  },
)
