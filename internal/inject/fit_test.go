package inject

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/testutil"
)

func withPorts(c corev1.Container, ports ...corev1.ContainerPort) corev1.Container {
	c.Ports = ports
	return c
}

func tcp(containerPort, hostPort int32) corev1.ContainerPort {
	return corev1.ContainerPort{ContainerPort: containerPort, HostPort: hostPort, Protocol: corev1.ProtocolTCP}
}

func TestMissingVolume(t *testing.T) {
	withDevice := func(c corev1.Container, name string) corev1.Container {
		c.VolumeDevices = []corev1.VolumeDevice{{Name: name, DevicePath: "/dev/x"}}
		return c
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		set  *v1alpha1.SidecarSet
		want string
	}{{
		name: "the pod declares the volume",
		pod:  testutil.Pod("shop", "db-0").Volumes(testutil.EmptyDirVolume("data")).Obj(),
		set:  testutil.SidecarSet("s").Containers(testutil.Container("exporter", "e").VolumeMount("data", "/data").Sidecar("")).Obj(),
	}, {
		name: "the set declares the volume",
		pod:  testutil.Pod("shop", "db-0").Obj(),
		set: testutil.SidecarSet("s").Containers(testutil.Container("exporter", "e").VolumeMount("conf", "/conf").Sidecar("")).
			Volumes(testutil.EmptyDirVolume("conf")).Obj(),
	}, {
		name: "neither declares it",
		pod:  testutil.Pod("shop", "db-0").Volumes(testutil.EmptyDirVolume("logs")).Obj(),
		set:  testutil.SidecarSet("s").Containers(testutil.Container("exporter", "e").VolumeMount("data", "/data").Sidecar("")).Obj(),
		want: `container "exporter" mounts volume "data", which neither the pod nor the SidecarSet declares`,
	}, {
		name: "an init container's mount counts too",
		pod:  testutil.Pod("shop", "db-0").Obj(),
		set:  testutil.SidecarSet("s").InitContainers(testutil.Container("shipper", "s").VolumeMount("logs", "/logs").RestartAlways().Sidecar("")).Obj(),
		want: `container "shipper" mounts volume "logs", which neither the pod nor the SidecarSet declares`,
	}, {
		name: "a device of a volume nobody declares",
		pod:  testutil.Pod("shop", "db-0").Obj(),
		set:  testutil.SidecarSet("s").Containers(v1alpha1.SidecarContainer{Container: withDevice(testutil.Container("exporter", "e").Obj(), "disk")}).Obj(),
		want: `container "exporter" uses volume "disk" as a device, which neither the pod nor the SidecarSet declares`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, missingVolume(&tc.pod.Spec, tc.set)); diff != "" {
				t.Errorf("missingVolume() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPortClash(t *testing.T) {
	app := func(ports ...corev1.ContainerPort) corev1.Container {
		return withPorts(testutil.Container("app", "a").Obj(), ports...)
	}
	sidecarSet := func(ports ...corev1.ContainerPort) *v1alpha1.SidecarSet {
		return testutil.SidecarSet("s").Containers(v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("exporter", "e").Obj(), ports...)}).Obj()
	}
	nativeSet := func(ports ...corev1.ContainerPort) *v1alpha1.SidecarSet {
		return testutil.SidecarSet("s").InitContainers(v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("exporter", "e").RestartAlways().Obj(), ports...)}).Obj()
	}
	initSet := func(ports ...corev1.ContainerPort) *v1alpha1.SidecarSet {
		return testutil.SidecarSet("s").InitContainers(v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("exporter", "e").Obj(), ports...)}).Obj()
	}
	hostNetwork := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.HostNetwork = true
		return p
	}
	udp := tcp(9104, 0)
	udp.Protocol = corev1.ProtocolUDP
	onIP := func(p corev1.ContainerPort, ip string) corev1.ContainerPort {
		p.HostIP = ip
		return p
	}
	earlierProxy := []sidecar{{set: "a", c: &v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("proxy", "p").Obj(), tcp(15001, 0))}}}

	cases := []struct {
		name    string
		pod     *corev1.Pod
		earlier []sidecar
		set     *v1alpha1.SidecarSet
		want    string
	}{{
		name: "different ports",
		pod:  testutil.Pod("shop", "db-0").Containers(app(tcp(3306, 0))).Obj(),
		set:  sidecarSet(tcp(9104, 0)),
	}, {
		name: "the same containerPort as the app: one network namespace",
		pod:  testutil.Pod("shop", "db-0").Containers(app(tcp(9104, 0))).Obj(),
		set:  sidecarSet(tcp(9104, 0)),
		want: `container "exporter" port 9104/TCP is already declared by container "app", and the containers of a pod share one network namespace`,
	}, {
		name: "the same number, another protocol",
		pod:  testutil.Pod("shop", "db-0").Containers(app(tcp(9104, 0))).Obj(),
		set:  sidecarSet(udp),
	}, {
		name: "an unset protocol is TCP",
		pod:  testutil.Pod("shop", "db-0").Containers(app(corev1.ContainerPort{ContainerPort: 9104})).Obj(),
		set:  sidecarSet(tcp(9104, 0)),
		want: `container "exporter" port 9104/TCP is already declared by container "app", and the containers of a pod share one network namespace`,
	}, {
		name: "the same hostPort",
		pod:  testutil.Pod("shop", "db-0").Containers(app(tcp(3306, 8080))).Obj(),
		set:  sidecarSet(tcp(9104, 8080)),
		want: `container "exporter" hostPort 8080/TCP is already taken by container "app"`,
	}, {
		name: "the same hostPort on another hostIP",
		pod:  testutil.Pod("shop", "db-0").Containers(app(onIP(tcp(3306, 8080), "10.0.0.1"))).Obj(),
		set:  sidecarSet(onIP(tcp(9104, 8080), "10.0.0.2")),
	}, {
		name: "the same hostPort, one hostIP unset: every address",
		pod:  testutil.Pod("shop", "db-0").Containers(app(onIP(tcp(3306, 8080), "10.0.0.1"))).Obj(),
		set:  sidecarSet(tcp(9104, 8080)),
		want: `container "exporter" hostPort 8080/TCP is already taken by container "app"`,
	}, {
		name:    "a port of a sidecar injected by an earlier set",
		pod:     testutil.Pod("shop", "db-0").Containers(app()).Obj(),
		earlier: earlierProxy,
		set:     sidecarSet(tcp(15001, 0)),
		want:    `container "exporter" port 15001/TCP is already declared by container "proxy", and the containers of a pod share one network namespace`,
	}, {
		name: "a native sidecar runs beside the app",
		pod:  testutil.Pod("shop", "db-0").Containers(app(tcp(9104, 0))).Obj(),
		set:  nativeSet(tcp(9104, 0)),
		want: `container "exporter" port 9104/TCP is already declared by container "app", and the containers of a pod share one network namespace`,
	}, {
		name: "the pod's native sidecar runs beside the sidecar",
		pod:  testutil.Pod("shop", "db-0").InitContainers(withPorts(testutil.Container("mesh", "m").RestartAlways().Obj(), tcp(9104, 0))).Containers(app()).Obj(),
		set:  sidecarSet(tcp(9104, 0)),
		want: `container "exporter" port 9104/TCP is already declared by container "mesh", and the containers of a pod share one network namespace`,
	}, {
		name: "an ordinary init container runs alone",
		pod:  testutil.Pod("shop", "db-0").InitContainers(withPorts(testutil.Container("setup", "s").Obj(), tcp(9104, 0))).Containers(app(tcp(9104, 0))).Obj(),
		set:  initSet(tcp(9104, 0)),
	}, {
		name: "hostNetwork: hostPort defaulted from containerPort",
		pod:  hostNetwork(testutil.Pod("shop", "db-0").Containers(app(tcp(3306, 3306))).Obj()),
		set:  sidecarSet(tcp(9104, 0)),
	}, {
		name: "hostNetwork: the app's port is the node's",
		pod:  hostNetwork(testutil.Pod("shop", "db-0").Containers(app(tcp(9104, 9104))).Obj()),
		set:  sidecarSet(tcp(9104, 0)),
		want: `container "exporter" port 9104/TCP is already declared by container "app", and the containers of a pod share one network namespace`,
	}, {
		name: "hostNetwork: a hostPort other than the containerPort",
		pod:  hostNetwork(testutil.Pod("shop", "db-0").Containers(app(tcp(3306, 3306))).Obj()),
		set:  sidecarSet(tcp(9104, 19104)),
		want: `container "exporter" port 9104/TCP has hostPort 19104, but in a hostNetwork pod hostPort must equal containerPort`,
	}, {
		name: "hostNetwork: an ordinary init container is not checked",
		pod:  hostNetwork(testutil.Pod("shop", "db-0").Containers(app(tcp(3306, 3306))).Obj()),
		set:  initSet(tcp(9104, 19104)),
	}, {
		name: "the set's own containers clash",
		pod:  testutil.Pod("shop", "db-0").Containers(app()).Obj(),
		set: testutil.SidecarSet("s").Containers(
			v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("one", "e").Obj(), tcp(80, 0))},
			v1alpha1.SidecarContainer{Container: withPorts(testutil.Container("two", "e").Obj(), tcp(80, 0))}).Obj(),
		want: `container "two" port 80/TCP is already declared by container "one", and the containers of a pod share one network namespace`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, portClash(&tc.pod.Spec, tc.earlier, tc.set)); diff != "" {
				t.Errorf("portClash() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodSecurityLevel(t *testing.T) {
	v131, err := psapi.ParseVersion("v1.31")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ns   *corev1.Namespace
		want psapi.LevelVersion
	}{
		{"labels unknown", nil, psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}},
		{"no labels", testutil.Namespace("shop", nil), psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}},
		{"restricted", testutil.Namespace("shop", map[string]string{psapi.EnforceLevelLabel: "restricted"}),
			psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}},
		{"baseline at a version", testutil.Namespace("shop", map[string]string{psapi.EnforceLevelLabel: "baseline", psapi.EnforceVersionLabel: "v1.31"}),
			psapi.LevelVersion{Level: psapi.LevelBaseline, Version: v131}},
		{"a level that cannot be parsed is restricted, as the apiserver reads it", testutil.Namespace("shop", map[string]string{psapi.EnforceLevelLabel: "strict"}),
			psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}},
		{"warn and audit do not refuse", testutil.Namespace("shop", map[string]string{psapi.WarnLevelLabel: "restricted", psapi.AuditLevelLabel: "restricted"}),
			psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := podSecurityLevel(tc.ns); got != tc.want {
				t.Errorf("podSecurityLevel() = %s, want %s", got.String(), tc.want.String())
			}
		})
	}
}

func TestPodSecurityViolation(t *testing.T) {
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	baseline := psapi.LevelVersion{Level: psapi.LevelBaseline, Version: psapi.LatestVersion()}
	privileged := psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}
	// hardened meets restricted.
	hardened := func(c corev1.Container) corev1.Container {
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		return c
	}
	privilegedC := func(c corev1.Container) corev1.Container {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		return c
	}
	spec := func(cs ...corev1.Container) *corev1.PodSpec { return &corev1.PodSpec{Containers: cs} }
	app := testutil.Container("app", "a").Obj()
	sidecar := testutil.Container("proxy", "p").Obj()

	cases := []struct {
		name          string
		lv            psapi.LevelVersion
		without, with *corev1.PodSpec
		want          string
	}{{
		name:    "privileged allows everything",
		lv:      privileged,
		without: spec(app), with: spec(privilegedC(sidecar), app),
	}, {
		name:    "baseline: a privileged sidecar",
		lv:      baseline,
		without: spec(app), with: spec(privilegedC(sidecar), app),
		want: `the namespace enforces Pod Security "baseline:latest", which the pod meets without this SidecarSet and violates with it: privileged (container "proxy" must not set securityContext.privileged=true)`,
	}, {
		name:    "baseline: an unhardened sidecar is fine",
		lv:      baseline,
		without: spec(app), with: spec(sidecar, app),
	}, {
		name:    "restricted: a hardened sidecar in a hardened pod",
		lv:      restricted,
		without: spec(hardened(app)), with: spec(hardened(sidecar), hardened(app)),
	}, {
		name:    "restricted: an unhardened sidecar in a hardened pod",
		lv:      restricted,
		without: spec(hardened(app)), with: spec(sidecar, hardened(app)),
		want: `the namespace enforces Pod Security "restricted:latest", which the pod meets without this SidecarSet and violates with it: allowPrivilegeEscalation != false (container "proxy" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "proxy" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "proxy" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "proxy" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
	}, {
		name:    "restricted: a pod that fails on its own is not the sidecar's doing",
		lv:      restricted,
		without: spec(app), with: spec(privilegedC(sidecar), app),
	}, {
		name:    "baseline: a hostPath volume of the set",
		lv:      baseline,
		without: spec(app),
		with: &corev1.PodSpec{Containers: []corev1.Container{sidecar, app}, Volumes: []corev1.Volume{
			testutil.HostPathVolume("logs", "/var/log")}},
		want: `the namespace enforces Pod Security "baseline:latest", which the pod meets without this SidecarSet and violates with it: hostPath volumes (volume "logs")`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podSecurityViolation(tc.lv, &metav1.ObjectMeta{Name: "db-0"}, tc.without, tc.with)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("podSecurityViolation() (-want +got):\n%s", diff)
			}
		})
	}
}
