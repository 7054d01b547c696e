package org.apache.kafka.connect.mirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.kafka.common.utils.Utils;

/**
 * What MirrorMaker 2 itself selects for one flow of an mm2.properties, name by name.
 *
 * The file is loaded as MirrorMaker.main loads it (Utils.loadProps), the flow's connector configs are
 * built by MirrorMakerConfig.connectorBaseConfig (cluster-prefixed and A->B-prefixed keys resolved as MM2
 * resolves them), and the decisions are MM2's own: MirrorSourceConnector.shouldReplicateTopic (the
 * configured topic.filter.class -- DefaultTopicFilter unless set -- plus the replication policy's
 * internal-topic rule and the cycle guard), shouldReplicateTopicConfigurationProperty (the configured
 * config.property.filter.class), and MirrorCheckpointConfig's group.filter.class. In this package
 * because those methods are package-private.
 *
 * Standard input, one request per line: "flow FILE<TAB>SOURCE<TAB>TARGET" loads a flow; then lines
 * "topic NAME", "group NAME", "config NAME" are answered "KIND NAME true|false"; "end" is answered "end"
 * (the caller's cue that a flow's answers are complete). One JVM answers every flow of a test session.
 */
public class MM2Selection {
    private MirrorSourceConnector connector;
    private GroupFilter groups;

    private void load(String file, String sourceAlias, String targetAlias) throws Exception {
        Map<String, String> raw = Utils.propsToStringMap(Utils.loadProps(file));
        MirrorMakerConfig mm2 = new MirrorMakerConfig(raw);
        SourceAndTarget flow = new SourceAndTarget(sourceAlias, targetAlias);
        MirrorSourceConfig source = new MirrorSourceConfig(mm2.connectorBaseConfig(flow, MirrorSourceConnector.class));
        MirrorCheckpointConfig checkpoint =
            new MirrorCheckpointConfig(mm2.connectorBaseConfig(flow, MirrorCheckpointConnector.class));
        connector = new MirrorSourceConnector(flow, source.replicationPolicy(), source.topicFilter(),
            source.configPropertyFilter());
        groups = checkpoint.groupFilter();
    }

    public static void main(String[] args) throws Exception {
        MM2Selection selection = new MM2Selection();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isEmpty()) continue;
            String[] parts = line.split(" ", 2);
            if (parts[0].equals("flow")) {
                String[] flow = parts[1].split("\t");
                selection.load(flow[0], flow[1], flow[2]);
                continue;
            }
            if (parts[0].equals("end")) {
                System.out.println("end");
                System.out.flush();
                continue;
            }
            boolean chosen = switch (parts[0]) {
                case "topic" -> selection.connector.shouldReplicateTopic(parts[1]);
                case "group" -> selection.groups.shouldReplicateGroup(parts[1]);
                case "config" -> selection.connector.shouldReplicateTopicConfigurationProperty(parts[1]);
                default -> throw new IllegalArgumentException("unknown kind: " + line);
            };
            System.out.println(parts[0] + " " + parts[1] + " " + chosen);
        }
    }
}
