// A lean JVM exactly-once copier: the ceiling a consume -> produce -> commit copier reaches on these
// brokers (the benchmark's "jvmcopier" row). Per slot one thread with a read_committed consumer and a
// transactional producer; each transaction carries the records and the consumer positions
// (sendOffsetsToTransaction), as eosmirror's slots do, with the same slot count, transaction length and
// producer batching. Partition p is copied by slot p % slots to the same partition of the same topic
// on the target, with key, value, headers and timestamp. No checks, no offset map: only the work
// the protocol cannot avoid.
//
// args: source target topic partitions slots transactionMs ends(comma list) resultPath
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxCopier {
    public static void main(String[] args) throws Exception {
        String source = args[0], target = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]), slots = Integer.parseInt(args[4]);
        long transactionMs = Long.parseLong(args[5]);
        String[] endText = args[6].split(",");
        long[] ends = new long[partitions];
        for (int p = 0; p < partitions; p++) ends[p] = Long.parseLong(endText[p]);
        String group = topic + "-jvmcopier";
        AtomicLong records = new AtomicLong(), transactions = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        long started = System.nanoTime();
        for (int k = 0; k < slots; k++) {
            final int slot = k;
            Thread t = new Thread(() -> {
                try {
                    copySlot(source, target, topic, partitions, slots, slot, transactionMs, ends, group, records,
                             transactions);
                } catch (Throwable e) {
                    synchronized (failures) { failures.add(e); }
                }
            }, "slot-" + k);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) t.join();
        double seconds = (System.nanoTime() - started) / 1e9;
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
        String json = String.format("{\"records\": %d, \"seconds\": %.3f, \"transactions\": %d, \"slots\": %d}",
                                    records.get(), seconds, transactions.get(), slots);
        Files.write(Paths.get(args[7]), json.getBytes("UTF-8"));
        System.out.println(json);
    }

    static void copySlot(String source, String target, String topic, int partitions, int slots, int slot,
                         long transactionMs, long[] ends, String group, AtomicLong records,
                         AtomicLong transactions) {
        Properties c = new Properties();
        c.put("bootstrap.servers", source);
        c.put("group.id", group);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "none");
        c.put("max.poll.records", "5000");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Properties p = new Properties();
        p.put("bootstrap.servers", target);
        p.put("transactional.id", topic + "-jvmcopier-" + slot);
        p.put("transaction.timeout.ms", String.valueOf(2 * transactionMs + 30_000));
        p.put("linger.ms", "20");
        p.put("batch.size", "1000000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        List<TopicPartition> mine = new ArrayList<>();
        for (int q = slot; q < partitions; q += slots) if (ends[q] > 0) mine.add(new TopicPartition(topic, q));
        if (mine.isEmpty()) return;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            consumer.assign(mine);
            for (TopicPartition tp : mine) consumer.seek(tp, 0);
            producer.initTransactions();
            ConsumerGroupMetadata metadata = new ConsumerGroupMetadata(group);
            List<TopicPartition> undone = new ArrayList<>(mine);
            while (!undone.isEmpty()) {
                producer.beginTransaction();
                long deadline = System.currentTimeMillis() + transactionMs;
                long copied = 0;
                while (!undone.isEmpty() && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : batch) {
                        if (r.offset() >= ends[r.partition()]) continue;
                        producer.send(new ProducerRecord<>(topic, r.partition(), r.timestamp(), r.key(), r.value(),
                                                           r.headers()));
                        copied++;
                    }
                    undone.removeIf(tp -> consumer.position(tp) >= ends[tp.partition()]);
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (TopicPartition tp : mine) {
                    offsets.put(tp, new OffsetAndMetadata(Math.min(consumer.position(tp), ends[tp.partition()])));
                }
                producer.sendOffsetsToTransaction(offsets, metadata);
                producer.commitTransaction();
                records.addAndGet(copied);
                transactions.incrementAndGet();
            }
        }
    }
}
