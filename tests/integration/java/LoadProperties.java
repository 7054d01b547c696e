import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.utils.Utils;

/**
 * Each file named on the command line loaded exactly as MirrorMaker 2 loads mm2.properties
 * (MirrorMaker.main: Utils.loadProps, then Utils.propsToStringMap). Prints "== <file>" and one line per
 * setting: key and value as UTF-16 code units in hex (4 digits each), so that no character -- tab,
 * line break, backslash, non-ASCII -- is lost or re-escaped on the way to the test.
 */
public class LoadProperties {
    public static void main(String[] args) throws Exception {
        for (String file : args) {
            System.out.println("== " + file);
            Map<String, String> props = new TreeMap<>(Utils.propsToStringMap(Utils.loadProps(file)));
            for (Map.Entry<String, String> e : props.entrySet())
                System.out.println(hex(e.getKey()) + " " + hex(e.getValue()));
        }
    }

    static String hex(String s) {
        StringBuilder out = new StringBuilder("x");   // never empty: an empty value stays a field
        for (char c : s.toCharArray()) out.append(String.format("%04x", (int) c));
        return out.toString();
    }
}
