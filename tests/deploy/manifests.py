"""deploy/kubernetes as a cluster would receive it: each overlay rendered by `kubectl kustomize`
(the kubectl that tests/deploy/tools/install.sh unpacks), and the offline schema validator
tools/validate.mjs; and cert-manager's part, played with openssl (issue_certificates). Shared by
test_validate.py and test_kubernetes.py."""

import json
import os
import re
import subprocess

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "tools")
KUBECTL = os.path.join(TOOLS, "bin", "kubectl")
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
KUBERNETES = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
OVERLAYS_DIR = os.path.join(KUBERNETES, "overlays")
NOT_INSTALLED = "run tests/deploy/tools/install.sh (scripts/install_deps.sh runs it)"


def overlays():
    return sorted(d for d in os.listdir(OVERLAYS_DIR)
                  if os.path.isfile(os.path.join(OVERLAYS_DIR, d, "kustomization.yaml")))


def render(directory):
    """The objects that `kubectl kustomize directory` renders, as dicts."""
    assert os.access(KUBECTL, os.X_OK), "no %s: %s" % (KUBECTL, NOT_INSTALLED)
    done = subprocess.run([KUBECTL, "kustomize", directory], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, "kubectl kustomize %s: %s" % (directory, done.stderr)
    return [o for o in yaml.safe_load_all(done.stdout) if o is not None]


def render_overlay(name):
    return render(os.path.join(OVERLAYS_DIR, name))


def validate(objects):
    """Schema errors per object (tools/validate.mjs): a list of (kind, name, [errors])."""
    assert os.path.isdir(os.path.join(TOOLS, "node_modules")), NOT_INSTALLED
    done = subprocess.run(["node", os.path.join(TOOLS, "validate.mjs")],
                          input=json.dumps(objects), capture_output=True, text=True,
                          timeout=120, cwd=TOOLS)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == len(objects)
    return [(r.get("kind"), r.get("name"), r["errors"]) for r in results]


def find(objects, kind, name=None):
    found = [o for o in objects
             if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, "expected one %s %s, found %d" % (kind, name or "", len(found))
    return found[0]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def all_containers(spec):
    return (spec.get("initContainers", []) + spec.get("containers", [])
            + spec.get("ephemeralContainers", []))


def container(workload, name):
    found = [c for c in all_containers(pod_spec(workload)) if c["name"] == name]
    assert len(found) == 1, "%s has no container %s" % (workload["metadata"]["name"], name)
    return found[0]


def plain_env(c):
    """The container's literal env values with Kubernetes' $(VAR) expansion applied."""
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            value = str(e["value"])
            for name, earlier in env.items():
                value = value.replace("$(%s)" % name, earlier)
            env[e["name"]] = value
    return env


def expand(value, env):
    """Kubernetes' $(VAR) expansion of a command, args or env value: $(VAR) becomes VAR's value
    where env defines VAR, $$ becomes $, and any other reference is left as written."""
    return re.sub(r"\$\$|\$\((\w+)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
                  str(value))


def declared_env(c, objects):
    """The container's environment as the manifest declares it: its envFrom ConfigMaps' data,
    then its literal env values (expanded), fieldRefs left out."""
    env = {}
    for ref in c.get("envFrom", []):
        env.update({k: str(v) for k, v in
                    find(objects, "ConfigMap", ref["configMapRef"]["name"])["data"].items()})
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
    return env


def command_line(c, objects):
    """The container's command and args as Kubernetes runs them, $(VAR) references expanded."""
    env = declared_env(c, objects)
    return [expand(a, env) for a in c.get("command", []) + c.get("args", [])]


# cert-manager's key usages as openssl names them.
KEY_USAGES = {"digital signature": "digitalSignature", "key encipherment": "keyEncipherment",
              "cert sign": "keyCertSign", "crl sign": "cRLSign"}
EXTENDED_KEY_USAGES = {"server auth": "serverAuth", "client auth": "clientAuth"}
CERTIFICATE_FIELDS = {"secretName", "commonName", "dnsNames", "usages", "privateKey", "issuerRef",
                      "isCA", "duration"}


def issue_certificates(objects, folder):
    """What cert-manager makes of the objects' Issuers (selfSigned, ca) and Certificates, with
    openssl: the Secrets they write, {secretName: {"tls.crt", "tls.key", "ca.crt": bytes}}.
    A field this does not know fails, so a Certificate is never issued other than as written."""
    issuers = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Issuer"}
    secrets = {}

    def openssl(*args):
        done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60,
                              cwd=folder)
        assert done.returncode == 0, "openssl %s: %s" % (" ".join(args), done.stderr)

    # The CAs first: their Secrets sign the others.
    for cert in sorted((o for o in objects if o["kind"] == "Certificate"),
                       key=lambda o: not o["spec"].get("isCA")):
        spec, name = cert["spec"], cert["metadata"]["name"]
        assert set(spec) <= CERTIFICATE_FIELDS, (name, set(spec) - CERTIFICATE_FIELDS)
        key = spec.get("privateKey", {})
        assert (key.get("algorithm"), key.get("size")) == ("ECDSA", 256), (name, key)
        issuer = issuers[spec["issuerRef"]["name"]]
        assert spec["issuerRef"].get("kind", "Issuer") == "Issuer", (name, spec["issuerRef"])
        ext = ["basicConstraints=critical,CA:%s" % ("TRUE" if spec.get("isCA") else "FALSE")]
        usages = spec.get("usages", ["digital signature", "key encipherment"])
        if spec.get("isCA"):
            usages = usages + ["cert sign", "crl sign"]
        ext.append("keyUsage=critical," + ",".join(KEY_USAGES[u] for u in usages
                                                   if u not in EXTENDED_KEY_USAGES))
        extended = [EXTENDED_KEY_USAGES[u] for u in usages if u in EXTENDED_KEY_USAGES]
        if extended:
            ext.append("extendedKeyUsage=" + ",".join(extended))
        if spec.get("dnsNames"):
            ext.append("subjectAltName=" + ",".join("DNS:" + d for d in spec["dnsNames"]))
        with open(os.path.join(folder, name + ".ext"), "w") as f:
            f.write("\n".join(ext) + "\n")
        subject = "/CN=" + spec.get("commonName", name)
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
        if set(issuer) == {"selfSigned"}:
            openssl("x509", "-req", "-in", name + ".csr", "-key", name + ".key", "-days", "7",
                    "-extfile", name + ".ext", "-out", name + ".crt")
        else:
            assert set(issuer) == {"ca"}, issuer
            ca = secrets[issuer["ca"]["secretName"]]
            for file in ("tls.crt", "tls.key"):
                with open(os.path.join(folder, "signer-" + file), "wb") as f:
                    f.write(ca[file])
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "signer-tls.crt", "-CAkey",
                    "signer-tls.key", "-set_serial", str(len(secrets) + 1), "-days", "7",
                    "-extfile", name + ".ext", "-out", name + ".crt")
        data = {}
        for file, source in (("tls.crt", name + ".crt"), ("tls.key", name + ".key")):
            with open(os.path.join(folder, source), "rb") as f:
                data[file] = f.read()
        # cert-manager's ca.crt: the issuing CA's certificate (a self-signed one is its own).
        data["ca.crt"] = data["tls.crt"] if "selfSigned" in issuer else \
            secrets[issuer["ca"]["secretName"]]["tls.crt"]
        secrets[spec["secretName"]] = data
    return secrets
