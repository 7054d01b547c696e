import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The tests' judge of what a Kafka application sees: Kafka's own Java KafkaConsumer (the project's jars),
 * read_committed, in one long-lived JVM per test session instead of a ConsoleConsumer JVM per read.
 *
 * It reads as ConsoleConsumer --from-beginning [--group G] [--max-messages N] does (a KafkaConsumer
 * subscribed to the topic in the group, auto.offset.reset=earliest, records taken in the order poll's
 * iterator gives them) but ends deterministically instead of after an idle timeout: when every assigned
 * partition's position has reached its endOffsets() (under read_committed, the last stable offset, taken
 * once the assignment is known), or when N records are taken. In a group it then commits as
 * ConsoleConsumer's cleanup does: the partitions whose fetched records were not all taken are sought back
 * to the first one not taken (ConsumerWrapper.resetUnconsumedOffsets), then the consumer's positions are
 * committed (ConsoleConsumer's close auto-commits them; here commitSync() of the same allConsumed()
 * positions, so a position past a transaction marker is committed past it, as there). Without a group:
 * the topic's partitions assigned, from the beginning, nothing committed.
 *
 * Standard input, one request a line, tab-separated: "read", budget in ms, max records (-1: to the end),
 * topic, group ("" for none), then consumer properties as key=value. Standard output, per request:
 * "r<TAB>partition<TAB>offset<TAB>value" per record (value in base64, "-" for null), "c<TAB>partition<TAB>
 * offset" per offset the group has committed (read back from the broker after the commit), then
 * "end<TAB>count", or "error<TAB>message" (no newline in it) when the read failed or its budget passed.
 * "ends", budget in ms, topic, then consumer properties: "e<TAB>partition<TAB>offset" per partition of the
 * topic, its latest offset (a read_uncommitted consumer's endOffsets: the high watermark, what
 * GetOffsetShell --time -1 prints), then "end<TAB>partitions". The client's logs go to standard error.
 */
public class Judge {
    private static PrintStream out;

    private static void say(String line) {
        out.println(line);
    }

    private static long left(long deadline) {
        return Math.max(1, deadline - System.currentTimeMillis());
    }

    private static String oneLine(Throwable e) {
        StringBuilder text = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (text.length() > 0) text.append(" <- ");
            text.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return text.toString().replace('\n', ' ').replace('\r', ' ');
    }

    private static Properties properties(String[] fields, int from) {
        Properties props = new Properties();
        for (int i = from; i < fields.length; i++) {
            int eq = fields[i].indexOf('=');
            props.put(fields[i].substring(0, eq), fields[i].substring(eq + 1));
        }
        return props;
    }

    /** The topic's partitions and each one's latest offset (the high watermark), as GetOffsetShell --time -1. */
    static void ends(String[] fields) {
        long deadline = System.currentTimeMillis() + Long.parseLong(fields[1]);
        String topic = fields[2];
        Properties props = properties(fields, 3);
        props.put("isolation.level", "read_uncommitted");
        props.putIfAbsent("client.id", "eosmirror-judge");
        String stage = "creating the consumer";
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            stage = "listing the topic's partitions";
            List<TopicPartition> all = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofMillis(left(deadline)))) {
                all.add(new TopicPartition(topic, info.partition()));
            }
            if (all.isEmpty()) throw new IllegalStateException("the topic has no partitions (no such topic?)");
            stage = "asking the end offsets";
            Map<Integer, Long> ends = new TreeMap<>();
            for (Map.Entry<TopicPartition, Long> end : consumer.endOffsets(all, Duration.ofMillis(left(deadline))).entrySet()) {
                ends.put(end.getKey().partition(), end.getValue());
            }
            for (Map.Entry<Integer, Long> end : ends.entrySet()) say("e\t" + end.getKey() + "\t" + end.getValue());
            say("end\t" + ends.size());
        } catch (Exception e) {
            say("error\t" + stage + ": " + oneLine(e));
        }
    }

    static void read(String[] fields) {
        long budgetMs = Long.parseLong(fields[1]);
        long max = Long.parseLong(fields[2]);
        String topic = fields[3];
        String group = fields[4];
        long deadline = System.currentTimeMillis() + budgetMs;
        Properties props = properties(fields, 5);
        props.put("isolation.level", "read_committed");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.putIfAbsent("client.id", "eosmirror-judge");
        if (!group.isEmpty()) props.put("group.id", group);
        long taken = 0;
        String stage = "creating the consumer";
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            try {
                if (group.isEmpty()) {
                    stage = "listing the topic's partitions";
                    List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(left(deadline)));
                    List<TopicPartition> all = new ArrayList<>();
                    for (PartitionInfo info : infos) all.add(new TopicPartition(topic, info.partition()));
                    consumer.assign(all);
                    consumer.seekToBeginning(all);
                } else {
                    consumer.subscribe(List.of(topic));
                }
                Map<TopicPartition, Long> ends = null;
                Map<TopicPartition, Long> unconsumed = new HashMap<>();
                while (true) {
                    if (System.currentTimeMillis() >= deadline) {
                        String where = "";
                        if (ends != null) {
                            Map<Integer, String> at = new TreeMap<>();
                            for (TopicPartition tp : ends.keySet()) {
                                at.put(tp.partition(), consumer.position(tp, Duration.ofMillis(1000)) + "/" + ends.get(tp));
                            }
                            where = "; position/end per partition " + at;
                        } else {
                            where = "; no partition was assigned yet";
                        }
                        throw new IllegalStateException("the read did not end within " + budgetMs + " ms" + where);
                    }
                    stage = "polling";
                    Set<TopicPartition> assigned = consumer.assignment();
                    if (ends == null && !assigned.isEmpty()) {
                        stage = "asking the end offsets";
                        ends = consumer.endOffsets(assigned, Duration.ofMillis(left(deadline)));
                    }
                    if (ends != null) {
                        stage = "asking the positions";
                        boolean atEnd = true;
                        for (TopicPartition tp : ends.keySet()) {
                            if (consumer.position(tp, Duration.ofMillis(left(deadline))) < ends.get(tp)) {
                                atEnd = false;
                                break;
                            }
                        }
                        if (atEnd) break;
                    }
                    if (max >= 0 && taken >= max) break;
                    stage = "polling";
                    Iterator<ConsumerRecord<byte[], byte[]>> records =
                        consumer.poll(Duration.ofMillis(Math.min(200, left(deadline)))).iterator();
                    while (records.hasNext()) {
                        ConsumerRecord<byte[], byte[]> record = records.next();
                        if (max >= 0 && taken >= max) {
                            unconsumed.putIfAbsent(new TopicPartition(record.topic(), record.partition()),
                                record.offset());
                            continue;
                        }
                        byte[] value = record.value();
                        say("r\t" + record.partition() + "\t" + record.offset() + "\t"
                            + (value == null ? "-" : Base64.getEncoder().encodeToString(value)));
                        taken++;
                    }
                    if (ends != null && !consumer.assignment().equals(ends.keySet())) {
                        throw new IllegalStateException("the assignment changed during the read: " + ends.keySet()
                            + " -> " + consumer.assignment());
                    }
                }
                if (!group.isEmpty()) {
                    stage = "committing";
                    for (Map.Entry<TopicPartition, Long> back : unconsumed.entrySet()) {
                        consumer.seek(back.getKey(), back.getValue());
                    }
                    consumer.commitSync(Duration.ofMillis(left(deadline)));
                    stage = "asking the committed offsets";
                    Map<Integer, Long> committed = new TreeMap<>();
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> c :
                             consumer.committed(consumer.assignment(), Duration.ofMillis(left(deadline))).entrySet()) {
                        if (c.getValue() != null) committed.put(c.getKey().partition(), c.getValue().offset());
                    }
                    for (Map.Entry<Integer, Long> c : committed.entrySet()) {
                        say("c\t" + c.getKey() + "\t" + c.getValue());
                    }
                }
                stage = "closing";
            } finally {
                consumer.close(Duration.ofMillis(Math.min(5000, left(deadline + 5000))));
            }
            say("end\t" + taken);
        } catch (Exception e) {
            say("error\t" + stage + " after " + taken + " record(s): " + oneLine(e));
        }
    }

    public static void main(String[] args) throws Exception {
        // The protocol owns the real standard output; anything else printing to System.out (the client's
        // logging) goes to standard error.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isEmpty()) continue;
            String[] fields = line.split("\t", -1);
            if (fields[0].equals("read")) {
                read(fields);
            } else if (fields[0].equals("ends")) {
                ends(fields);
            } else {
                say("error\tunknown request: " + fields[0]);
            }
            out.flush();
        }
    }
}
