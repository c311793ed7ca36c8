package telemetry

import (
	"errors"
	"os"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/bind"
	"github.com/gpumem/gpumem/sim"
)

func newFakeBackend(t *testing.T, name string, n int, pci []pciAddr) *fakeBackend {
	t.Helper()
	g, err := sim.New(sim.Config{Devices: make([]sim.DeviceConfig, n), NoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &fakeBackend{GPU: g, name: name, pci: pci}
}

var (
	pciA = pciAddr{domain: 0, bus: 0x18, dev: 0}
	pciB = pciAddr{domain: 0, bus: 0x3b, dev: 0}
	pciC = pciAddr{domain: 1, bus: 0x3b, dev: 0}
)

func fakeDevices() []fakeDev {
	self := uint64(os.Getpid())
	return []fakeDev{
		{name: "GPU A", pci: pciA, total: 80 << 30, used: 3 << 30, procs: [][2]uint64{{self, 1 << 30}, {101, 2 << 30}},
			util: 40, memUtil: 10, tempC: 51, powerMW: 250500, smMHz: 1980, memMHz: 2619},
		{name: "GPU B", pci: pciB, total: 80 << 30, used: 5 << 30, procs: [][2]uint64{{102, 5 << 30}, {103, ^uint64(0)}},
			util: 0, memUtil: 0, tempC: 33, powerMW: 70000, smMHz: 345, memMHz: 2619},
		{name: "GPU C", pci: pciC, total: 80 << 30},
	}
}

// The backend sees NVML's devices 2 and 1 as its 0 and 1
// (CUDA_VISIBLE_DEVICES=2,1): telemetry follows the PCI addresses.
func TestNVMLMapsDevicesByPCI(t *testing.T) {
	setFake(fakeDevices())
	b := newFakeBackend(t, "cuda", 2, []pciAddr{pciC, pciB})
	tel, err := Open(b, bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	if tel.Backend() != "nvml" || tel.DeviceCount() != 2 || len(tel.Notes()) != 0 {
		t.Fatalf("%s, %d devices, notes %v", tel.Backend(), tel.DeviceCount(), tel.Notes())
	}
	s, err := tel.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	want := DeviceStats{Device: 1, Name: "GPU B", PCIBusID: "0000:3b:00.0", MemoryUsed: 5 << 30, MemoryTotal: 80 << 30,
		UtilizationGPU: 0, UtilizationMemory: 0, TemperatureC: 33, PowerW: 70, ClockSMMHz: 345, ClockMemMHz: 2619,
		Supported: FieldMemory | FieldUtilizationGPU | FieldUtilizationMemory | FieldTemperature | FieldPower | FieldClockSM | FieldClockMem}
	if s != want {
		t.Fatalf("device 1:\n got %+v\nwant %+v", s, want)
	}
	if s, _ := tel.Device(0); s.Name != "GPU C" || s.PCIBusID != "0001:3b:00.0" || s.Has(FieldPower) {
		t.Fatalf("device 0 (no power reading): %+v", s)
	}
	others, procs, err := tel.Others(1)
	if err != nil || others != 5<<30 || len(procs) != 2 || !procs[1].Unknown || procs[1].PID != 103 {
		t.Fatalf("Others(1): %d %+v %v", others, procs, err)
	}
	if _, listed, _ := tel.Self(1); listed {
		t.Fatal("this process is not on device 1")
	}
}

func TestNVMLProcesses(t *testing.T) {
	devs := fakeDevices()
	for pid := 200; pid < 240; pid++ { // more than the first buffer holds
		devs[0].procs = append(devs[0].procs, [2]uint64{uint64(pid), 1 << 20})
	}
	setFake(devs, "nvmlDeviceGetComputeRunningProcesses_v3")
	tel, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	if tel.DeviceCount() != 3 {
		t.Fatalf("%d devices", tel.DeviceCount())
	}
	ps, err := tel.Processes(0)
	if err != nil || len(ps) != 42 {
		t.Fatalf("%d processes (through _v2, after a short buffer): %v", len(ps), err)
	}
	self, listed, err := tel.Self(0)
	if err != nil || !listed || self != 1<<30 {
		t.Fatalf("Self: %d %v %v", self, listed, err)
	}
	others, _, _ := tel.Others(0)
	if others != 2<<30+40<<20 {
		t.Fatalf("Others: %d", others)
	}
	if s, _ := tel.Device(2); s.PCIBusID != "0001:3b:00.0" {
		t.Fatalf("PCI address from nvmlDeviceGetPciInfo_v3: %+v", s)
	}
}

// Optional rows missing: their readings only are absent.
func TestNVMLOptionalRows(t *testing.T) {
	setFake(fakeDevices(), "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo", "nvmlDeviceGetPciInfo_v3",
		"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")
	tel, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	s, err := tel.Device(0)
	if err != nil || s.Has(FieldPower) || s.Has(FieldClockSM) || !s.Has(FieldTemperature|FieldMemory) || s.PCIBusID != "" {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := tel.Processes(0); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("Processes with neither row: %v", err)
	}
	// A required row missing fails the load, naming it.
	setFake(fakeDevices(), "nvmlDeviceGetMemoryInfo")
	var ms *gpumem.MissingSymbolsError
	if _, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader)); !errors.As(err, &ms) || ms.Symbols[0] != "nvmlDeviceGetMemoryInfo" {
		t.Fatalf("without nvmlDeviceGetMemoryInfo: %v", err)
	}
}

func TestNVMLNoDriver(t *testing.T) {
	setFake(fakeDevices())
	fake.initCode = nvmlErrorDriverNotLoaded
	_, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader))
	var be *bind.Error
	if !errors.Is(err, gpumem.ErrNoDevice) || !errors.As(err, &be) || be.Name != "Driver Not Loaded" {
		t.Fatalf("nvmlInit_v2 failing: %v", err)
	}
	setFake(nil)
	if _, err := OpenSystem(bind.CUDA, bind.WithLoader(fakeLoader)); !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("no device: %v", err)
	}
}

// A backend that tells no PCI address: the ordinal is taken, and noted; a
// device NVML does not have is an error of that device only.
func TestNVMLWithoutPCI(t *testing.T) {
	setFake(fakeDevices())
	tel, err := Open(newFakeBackend(t, "cuda", 2, nil), bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	if len(tel.Notes()) != 2 {
		t.Fatalf("notes %v", tel.Notes())
	}
	if s, _ := tel.Device(1); s.Name != "GPU B" {
		t.Fatalf("device 1 by ordinal: %+v", s)
	}
	tel2, err := Open(newFakeBackend(t, "cuda", 2, []pciAddr{pciA, {bus: 0x99}}), bind.WithLoader(fakeLoader))
	if err != nil {
		t.Fatal(err)
	}
	defer tel2.Close()
	if _, err := tel2.Device(1); !errors.Is(err, gpumem.ErrNotSupported) {
		t.Fatalf("a device NVML lacks: %v", err)
	}
	if s, err := tel2.Device(0); err != nil || s.Name != "GPU A" {
		t.Fatalf("device 0: %+v %v", s, err)
	}
}

func TestROCmSMI(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		devs := fakeDevices()
		devs[2].procs = [][2]uint64{{101, 512 << 20}} // process 101 on devices 0 and 2
		if v6 {
			// 6.x: the activity row resolves and tells the layout.
			setFake(devs)
			fake.v6 = true
		} else {
			setFake(devs, "rsmi_dev_power_get", "rsmi_dev_activity_metric_get", "rsmi_compute_process_info_by_device_get")
		}
		b := newFakeBackend(t, "hip", 2, []pciAddr{pciB, pciA})
		tel, err := Open(b, bind.WithLoader(fakeLoader))
		if err != nil {
			t.Fatal(err)
		}
		s, err := tel.Device(1)
		if err != nil {
			t.Fatal(err)
		}
		wantPower := 250.500001 // rsmi_dev_power_ave_get, which the fake tells apart
		if v6 {
			wantPower = 250.5
		}
		if s.Name != "GPU A" || s.MemoryUsed != 3<<30 || s.UtilizationGPU != 40 || s.TemperatureC != 51 ||
			s.PowerW != wantPower || s.ClockSMMHz != 1980 || s.ClockMemMHz != 2619 || s.PCIBusID != "0000:18:00.0" {
			t.Errorf("v6 %v: %+v", v6, s)
		}
		others, procs, err := tel.Others(1)
		if err != nil || len(procs) != 1 || procs[0].PID != 101 {
			t.Fatalf("v6 %v: Others %d %+v %v", v6, others, procs, err)
		}
		if v6 && (procs[0].Unknown || others != 2<<30) {
			t.Errorf("6.x per-device figure: %+v", procs)
		}
		if !v6 && !procs[0].Unknown {
			t.Errorf("5.x has no per-device figure for a process on two devices: %+v", procs)
		}
		if self, listed, _ := tel.Self(1); !listed || self != 1<<30 {
			t.Errorf("v6 %v: Self %d %v", v6, self, listed)
		}
		tel.Close()
	}
	setFake(fakeDevices())
	fake.initCode = rsmiStatusInitError
	if _, err := OpenSystem(bind.HIP, bind.WithLoader(fakeLoader)); !errors.Is(err, gpumem.ErrNoDevice) {
		t.Fatalf("rsmi_init failing: %v", err)
	}
}
